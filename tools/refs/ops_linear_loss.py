"""References for ops/loss's linear_cross_entropy: F.cross_entropy(F.linear(x, W, b), t) with
ignore_index, label smoothing and sum/mean, on (N, D) and (B, T, D) inputs, with and without a
bias; the gradients of x, W and b for a random upstream scalar. Computed in float64 from float32
inputs, stored as float32."""
import torch
import torch.nn.functional as F
from qkvref import Refs, grads


def main(out):
    g = torch.Generator().manual_seed(16)
    r = Refs()
    cases = [  # (x shape, classes, bias, ignore_index, smoothing, ignored fraction)
        ((7, 5), 11, True, -100, 0.0, 0.0), ((7, 5), 11, False, -100, 0.1, 0.3), ((2, 9, 16), 40, True, 0, 0.0, 0.25),
        ((3, 5, 24), 300, False, -100, 0.05, 0.2), ((1, 3), 4, True, -100, 0.0, 0.0),
    ]
    for i, (shape, classes, has_bias, ign, ls, frac) in enumerate(cases):
        for red in ["sum", "mean"]:
            d = shape[-1]
            x = torch.randn(shape, generator=g)
            w = torch.randn(classes, d, generator=g) * d ** -0.5 * 2
            b = torch.randn(classes, generator=g) if has_bias else None
            t = torch.randint(0, classes, shape[:-1], generator=g)
            if frac > 0:
                t[torch.rand(shape[:-1], generator=g) < frac] = ign
                t.view(-1)[0] = ign  # at least one ignored
            xr, wr = x.double().requires_grad_(True), w.double().requires_grad_(True)
            br = b.double().requires_grad_(True) if has_bias else None
            logits = F.linear(xr, wr, br)
            y = F.cross_entropy(logits.reshape(-1, classes), t.reshape(-1), ignore_index=ign, label_smoothing=ls,
                                reduction=red)
            gy = torch.randn((), generator=g)
            ins = [xr, wr] + ([br] if has_bias else [])
            gs = grads(y, ins, gy.double())
            r.case(f"lce_{i}_{red}", {"ignore_index": ign, "smoothing": ls, "reduction": red},
                   x=x, w=w, b=b, t=t, y=y.float(), gy=gy, gx=gs[0].float(), gw=gs[1].float(),
                   gb=gs[2].float() if has_bias else None)
    r.save(out)
