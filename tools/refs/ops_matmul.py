"""References for ops/matmul: torch.matmul and F.linear, forward and every input gradient.

Inputs are float32 (one float64 case); the expected values are computed by PyTorch in float64
from those same inputs and stored in the input dtype, so a test's tolerance only has to cover
qkv's own rounding. Each case records the number of products summed into one output element of
y and of each gradient ("ky", "ka", "kb", "kw", "kbias") for the test's K-scaled atol.

"pre_a" / "pre_b" / "pre_x": the view of the stored leaf the op sees: "none", "t" (the leaf is
stored transposed and the op gets its transpose view, which must reach BLAS as a transpose flag
without a copy) or "s2" (every second column: not BLAS-compatible, copied once).
"""
import math

import torch
import torch.nn.functional as F
from qkvref import Refs


def pre_view(t, pre):
    if pre == "t":
        return t.transpose(-1, -2)
    if pre == "s2":
        return t[..., ::2]
    return t


def leaf(g, shape, pre, dtype):
    shape = list(shape)
    if pre == "t":
        shape[-1], shape[-2] = shape[-2], shape[-1]
    elif pre == "s2":
        shape[-1] *= 2
    return torch.randn(shape, generator=g, dtype=dtype)


def batch_numel(shape):
    return math.prod(shape[:-2]) if len(shape) > 2 else 1


MATMUL = [  # (shape a, shape b, pre a, pre b, dtype)
    ((4,), (4, 6), "none", "none", torch.float32),
    ((5, 4), (4,), "none", "none", torch.float32),
    ((7,), (7,), "none", "none", torch.float32),
    ((5, 4), (4, 6), "none", "none", torch.float32),
    ((2, 1, 3, 4), (5, 4, 6), "none", "none", torch.float32),
    ((3, 5, 4), (4, 6), "none", "none", torch.float32),
    ((4,), (2, 4, 3), "none", "none", torch.float32),
    ((2, 3, 5, 4), (4,), "none", "none", torch.float32),
    ((5, 4), (4, 6), "t", "t", torch.float32),
    ((3, 5, 4), (3, 4, 6), "t", "t", torch.float32),
    ((2, 1, 3, 4), (5, 4, 6), "t", "none", torch.float32),
    ((5, 4), (4, 6), "s2", "none", torch.float32),
    ((3, 5, 4), (4, 6), "none", "s2", torch.float32),
    ((1, 1, 3, 4), (2, 5, 4, 6), "none", "t", torch.float32),
    ((1, 3, 4), (6, 4, 5), "none", "none", torch.float32),
    ((64, 96), (96, 80), "t", "none", torch.float32),
    ((8, 33, 65), (8, 65, 17), "none", "t", torch.float32),
    ((4, 16, 40), (40, 24), "t", "t", torch.float32),
    ((3, 0), (0, 4), "none", "none", torch.float32),
    ((2, 3, 4), (4, 5), "t", "none", torch.float64),
    ((2, 1, 3, 7), (4, 7, 2), "none", "t", torch.float64),
]

LINEAR = [  # (shape x, out features, bias?, pre x)
    ((2, 5, 7), 3, True, "none"),
    ((2, 5, 7), 3, False, "none"),
    ((2, 5, 7), 4, True, "t"),
    ((7,), 3, True, "none"),
    ((4, 33, 64), 48, True, "none"),
    ((6, 10), 5, True, "s2"),
]


def main(out):
    g = torch.Generator().manual_seed(5)
    r = Refs()
    for i, (sa, sb, pa, pb, dt) in enumerate(MATMUL):
        a, b = leaf(g, sa, pa, dt), leaf(g, sb, pb, dt)
        ad = a.double().requires_grad_(True)
        bd = b.double().requires_grad_(True)
        y = torch.matmul(pre_view(ad, pa), pre_view(bd, pb))
        gy = torch.randn(y.shape, generator=g, dtype=dt)
        ga, gb = torch.autograd.grad(y, [ad, bd], gy.double())
        a2 = sa if len(sa) > 1 else (1,) + sa
        b2 = sb if len(sb) > 1 else sb + (1,)
        nb = math.prod(torch.broadcast_shapes(a2[:-2], b2[:-2]))
        params = {"pre_a": pa, "pre_b": pb, "ky": a2[-1], "ka": b2[-1] * nb // batch_numel(a2),
                  "kb": a2[-2] * nb // batch_numel(b2), "copies": int(pa == "s2") + int(pb == "s2")}
        r.case(f"matmul_{i:02d}", params, a=a, b=b, y=y.to(dt), gy=gy, ga=ga.to(dt), gb=gb.to(dt))
    for i, (sx, nout, has_bias, px) in enumerate(LINEAR):
        x = leaf(g, sx, px, torch.float32)
        w = torch.randn(nout, sx[-1], generator=g)
        bias = torch.randn(nout, generator=g) if has_bias else None
        xd, wd = x.double().requires_grad_(True), w.double().requires_grad_(True)
        bd = bias.double().requires_grad_(True) if has_bias else None
        y = F.linear(pre_view(xd, px), wd, bd)
        gy = torch.randn(y.shape, generator=g)
        gs = torch.autograd.grad(y, [xd, wd] + ([bd] if has_bias else []), gy.double())
        rows = math.prod(sx[:-1])
        params = {"pre_x": px, "bias": has_bias, "ky": sx[-1], "kx": nout, "kw": rows, "kbias": rows}
        r.case(f"linear_{i}", params, x=x, w=w, bias=bias, y=y.float(), gy=gy, gx=gs[0].float(), gw=gs[1].float(),
               gbias=gs[2].float() if has_bias else None)
    r.save(out)
