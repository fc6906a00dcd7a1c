"""References for ops/reduce: sum / mean over single, multiple, negative axes with and without
keepdim (some inputs non-contiguous), max(dim) values + gradient, argmax. Computed in float64 from
the float32 inputs, stored as float32 (so the reference is the exact value, not torch's rounding)."""
import torch
from qkvref import Refs, grads

CASES = [  # (shape, axes (None = all), keepdim, transposed)
    ((5, 7), [1], False, False), ((5, 7), [0], True, False), ((5, 7), None, False, False),
    ((3, 4, 6), [-1], True, False), ((3, 4, 6), [0, 2], False, False), ((3, 4, 6), [-3, -2], True, False),
    ((2, 3, 4, 5), [1, 3], True, True), ((2, 3, 4, 5), [0, 1, 2, 3], False, False),
    ((6, 9), [1], False, True), ((6, 9), [0], False, True), ((40, 1000), [1], False, False),
    ((300, 257), None, True, False), ((2, 50000), [1], False, False), ((70000,), [0], False, False),
]
MAX_CASES = [((5, 7), 1, False, False), ((5, 7), 0, True, False), ((3, 4, 6), -2, False, False),
             ((3, 4, 6), 2, True, True), ((64, 1000), -1, False, False)]


def main(out):
    g = torch.Generator().manual_seed(2)
    r = Refs()
    for op in ("sum", "mean"):
        for i, (shape, axes, keepdim, transposed) in enumerate(CASES):
            x = torch.randn(shape, generator=g)
            xin = x.transpose(-1, -2).contiguous() if transposed else x
            xr = x.double().requires_grad_(True)
            fn = torch.sum if op == "sum" else torch.mean
            y = fn(xr) if axes is None else fn(xr, dim=axes, keepdim=keepdim)
            if axes is None and keepdim:
                y = y.reshape([1] * len(shape))
            gy = torch.randn(y.shape, generator=g)
            (gx,) = grads(y, [xr], gy.double())
            r.case(f"{op}_{i}", {"op": op, "axes": axes or [], "keepdim": keepdim, "transposed": transposed},
                   x=xin, y=y.float(), gy=gy, gx=gx.float())
    for i, (shape, axis, keepdim, transposed) in enumerate(MAX_CASES):
        x = torch.randn(shape, generator=g)
        xin = x.transpose(-1, -2).contiguous() if transposed else x
        xr = x.clone().requires_grad_(True)
        y, idx = torch.max(xr, dim=axis, keepdim=keepdim)
        gy = torch.randn(y.shape, generator=g)
        (gx,) = grads(y, [xr], gy)
        r.case(f"max_{i}", {"op": "max", "axis": axis, "keepdim": keepdim, "transposed": transposed},
               x=xin, y=y, idx=idx, gy=gy, gx=gx)
    # Ties: torch.max(dim) picks the first maximal element on CPU.
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 5.0], [0.0, -1.0, 0.0, 0.0]])
    xr = x.clone().requires_grad_(True)
    y, idx = torch.max(xr, dim=1)
    gy = torch.tensor([1.0, 2.0, 3.0])
    (gx,) = grads(y, [xr], gy)
    r.case("max_ties", {"op": "max", "axis": 1, "keepdim": False, "transposed": False},
           x=x, y=y, idx=idx, gy=gy, gx=gx)
    r.save(out)
