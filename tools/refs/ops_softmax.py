"""References for ops/softmax: softmax / log_softmax over the last axis with no mask, bool masks
(true = masked out), additive masks (with -inf), broadcast masks ((B,1,1,T) against (B,H,T,T)) and
fully masked rows. qkv's rule for a fully masked row - softmax 0, log_softmax -inf, zero gradient -
is built explicitly here (torch itself gives NaN there). Computed in float64, stored as float32."""
import torch
from qkvref import Refs, grads


def reference(x, mask, kind, log):
    """qkv semantics in torch ops: returns y (float64) given x (float64, requires grad)."""
    if kind == "bool":
        v = x.masked_fill(mask, float("-inf"))
    elif kind == "add":
        v = x + mask
    else:
        v = x
    full = torch.isneginf(v).all(dim=-1, keepdim=True)
    v_safe = torch.where(full, torch.zeros_like(v), v)
    y = torch.log_softmax(v_safe, -1) if log else torch.softmax(v_safe, -1)
    fill = float("-inf") if log else 0.0
    return torch.where(full, torch.full_like(y, fill), y)


def main(out):
    g = torch.Generator().manual_seed(3)
    r = Refs()
    cases = []  # (name, x shape, mask kind, mask shape, fully masked rows?)
    for shape in [(5, 7), (3, 4, 1024), (2, 3, 33), (1, 1)]:
        cases.append(("plain", shape, "none", None, False))
    cases += [("bool_same", (4, 6, 9), "bool", (4, 6, 9), True),
              ("bool_bcast", (2, 3, 5, 5), "bool", (2, 1, 1, 5), True),   # key padding, batch 1 all padded
              ("bool_causal", (2, 2, 6, 6), "bool", (6, 6), False),
              ("add_bcast", (2, 3, 5, 5), "add", (2, 1, 1, 5), False),
              ("add_neginf", (3, 4, 8), "add", (4, 8), True),
              ("add_row", (6, 40), "add", (40,), False)]
    for i, (name, shape, kind, mshape, full) in enumerate(cases):
        for log in (False, True):
            x = torch.randn(shape, generator=g) * 2
            mask = None
            if kind == "bool":
                if name == "bool_causal":
                    t = mshape[0]
                    mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
                else:
                    mask = torch.rand(mshape, generator=g) < 0.3
                    if name == "bool_bcast":
                        mask[1] = True  # every key of batch 1 padded -> fully masked rows
                    else:
                        mask[0, 1] = True  # one fully masked row
            elif kind == "add":
                mask = torch.randn(mshape, generator=g)
                if name == "add_neginf":
                    mask[torch.rand(mshape, generator=g) < 0.3] = float("-inf")
                    mask[1] = float("-inf")  # row 1 of every batch fully masked
                elif name == "add_bcast":
                    mask[0, 0, 0, 3] = float("-inf")
            xr = x.double().requires_grad_(True)
            mr = None
            if kind == "add":
                mr = mask.double().requires_grad_(True)
            y = reference(xr, mr if kind == "add" else mask, kind, log)
            gy = torch.randn(shape, generator=g)
            ins = [xr] + ([mr] if mr is not None else [])
            gs = grads(y, ins, gy.double())
            gx = gs[0]
            gmask = gs[1] if mr is not None else None
            # torch's -inf mask entries give a finite gradient (d(x+m)/dm = 1); keep it as is.
            r.case(f"{name}_{i}_{'log' if log else 'sm'}", {"log": log, "mask": kind, "full_rows": full},
                   x=x, mask=mask, y=y.float(), gy=gy, gx=gx.float(),
                   gmask=gmask.float() if gmask is not None else None)
    r.save(out)
