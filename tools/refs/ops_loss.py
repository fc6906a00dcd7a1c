"""References for ops/loss: cross_entropy (class axis last) with ignore_index, label smoothing and
reductions none/sum/mean on (N, C) and (B, T, C) logits; nll_loss; mse_loss. Computed in float64
from float32 inputs, stored as float32; three cross-entropy cases have logits around 1e4. An all-ignored batch is not generated here: qkv defines
its mean as 0 (torch: NaN) and tests that rule directly."""
import torch
import torch.nn.functional as F
from qkvref import Refs, grads

RED = ["none", "sum", "mean"]


def main(out):
    g = torch.Generator().manual_seed(6)
    r = Refs()
    ce = [  # (logits shape, ignore_index, smoothing, ignored fraction)
        ((8, 5), -100, 0.0, 0.0), ((8, 5), -100, 0.1, 0.0), ((16, 10), 3, 0.0, 0.0), ((16, 10), -1, 0.2, 0.3),
        ((2, 6, 7), 0, 0.0, 0.25), ((2, 6, 7), -100, 0.05, 0.25), ((4, 1000), -100, 0.1, 0.25), ((1, 3), -100, 0.0, 0.0),
    ]
    # Logits around 1e4 (an offset far above their spread): the loss and gradient must not round
    # the logsumexp to the logits' magnitude (torch: (x - max) - log sum).
    big = [((8, 5), -100, 0.0, 0.0), ((8, 5), -100, 0.1, 0.0), ((4, 1000), -100, 0.1, 0.25)]
    for i, (shape, ign, ls, frac) in enumerate(ce + big):
        for red in RED:
            c = shape[-1]
            x = torch.randn(shape, generator=g) * 3 + (1e4 if i >= len(ce) else 0.0)
            t = torch.randint(0, c, shape[:-1], generator=g)
            if frac > 0:
                t[torch.rand(shape[:-1], generator=g) < frac] = ign
                t.view(-1)[0] = ign  # at least one ignored
            xr = x.double().requires_grad_(True)
            y = F.cross_entropy(xr.reshape(-1, c), t.reshape(-1), ignore_index=ign, label_smoothing=ls, reduction=red)
            if red == "none":
                y = y.reshape(shape[:-1])
            gy = torch.randn(y.shape, generator=g)
            (gx,) = grads(y, [xr], gy.double())
            r.case(f"ce_{i}_{red}", {"op": "cross_entropy", "ignore_index": ign, "smoothing": ls, "reduction": red},
                   x=x, t=t, y=y.float(), gy=gy, gx=gx.float())
    for i, (shape, ign) in enumerate([((8, 5), -100), ((3, 4, 6), 2)]):
        for red in RED:
            c = shape[-1]
            lp = torch.log_softmax(torch.randn(shape, generator=g), -1)
            t = torch.randint(0, c, shape[:-1], generator=g)
            xr = lp.double().requires_grad_(True)
            y = F.nll_loss(xr.reshape(-1, c), t.reshape(-1), ignore_index=ign, reduction=red)
            if red == "none":
                y = y.reshape(shape[:-1])
            gy = torch.randn(y.shape, generator=g)
            (gx,) = grads(y, [xr], gy.double())
            r.case(f"nll_{i}_{red}", {"op": "nll", "ignore_index": ign, "reduction": red},
                   x=lp, t=t, y=y.float(), gy=gy, gx=gx.float())
    for i, shape in enumerate([(7,), (3, 4, 5)]):
        for red in RED:
            a = torch.randn(shape, generator=g)
            b = torch.randn(shape, generator=g)
            ar, br = a.double().requires_grad_(True), b.double().requires_grad_(True)
            y = F.mse_loss(ar, br, reduction=red)
            gy = torch.randn(y.shape, generator=g)
            ga, gb = grads(y, [ar, br], gy.double())
            r.case(f"mse_{i}_{red}", {"op": "mse", "reduction": red}, a=a, b=b, y=y.float(), gy=gy,
                   ga=ga.float(), gb=gb.float())
    r.save(out)
