"""References for ops/norm: layer_norm over the last axis, with and without affine parameters,
several widths (1, odd, 1024). Computed in float64 from float32 inputs, stored as float32."""
import torch
import torch.nn.functional as F
from qkvref import Refs, grads

SHAPES = [(4, 1024), (3, 5, 7), (6, 1), (2, 3, 33), (64, 768), (1, 1023)]


def main(out):
    g = torch.Generator().manual_seed(4)
    r = Refs()
    for i, shape in enumerate(SHAPES):
        for affine in ("both", "none", "weight"):
            c = shape[-1]
            x = torch.randn(shape, generator=g) * 1.5 + 0.3
            w = torch.randn(c, generator=g) if affine in ("both", "weight") else None
            b = torch.randn(c, generator=g) if affine == "both" else None
            eps = 1e-5 if i % 2 == 0 else 1e-3
            xr = x.double().requires_grad_(True)
            wr = w.double().requires_grad_(True) if w is not None else None
            br = b.double().requires_grad_(True) if b is not None else None
            y = F.layer_norm(xr, (c,), wr, br, eps)
            gy = torch.randn(shape, generator=g)
            ins = [t for t in (xr, wr, br) if t is not None]
            gs = grads(y, ins, gy.double())
            gx = gs[0]
            gw = gs[1] if wr is not None else None
            gb = gs[2] if br is not None else None
            r.case(f"ln_{i}_{affine}", {"eps": eps}, x=x, w=w, b=b, y=y.float(), gy=gy, gx=gx.float(),
                   gw=gw.float() if gw is not None else None, gb=gb.float() if gb is not None else None)
    r.save(out)
