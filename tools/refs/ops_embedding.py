"""References for ops/embedding: lookup of i64 / i32 ids of several shapes with repeated ids and a
padding_idx (whose row gets zero gradient), computed in float64, stored as float32."""
import torch
import torch.nn.functional as F
from qkvref import Refs, grads

CASES = [  # (ids shape, V, D, padding_idx, id dtype)
    ((2, 5), 7, 4, -1, torch.int64), ((2, 5), 7, 4, 3, torch.int64), ((13,), 5, 9, 0, torch.int32),
    ((2, 3, 4), 11, 16, 10, torch.int64), ((64, 32), 100, 128, 1, torch.int64), ((1,), 1, 3, -1, torch.int32),
]


def main(out):
    g = torch.Generator().manual_seed(5)
    r = Refs()
    for i, (shape, v, d, pad, dt) in enumerate(CASES):
        ids = torch.randint(0, v, shape, generator=g)
        if pad >= 0:
            ids.view(-1)[0] = pad  # the padding id occurs (and repeats below)
            ids.view(-1)[-1] = pad
        w = torch.randn(v, d, generator=g)
        wr = w.double().requires_grad_(True)
        y = F.embedding(ids, wr, padding_idx=pad if pad >= 0 else None)
        gy = torch.randn(y.shape, generator=g)
        (gw,) = grads(y, [wr], gy.double())
        r.case(f"emb_{i}", {"padding_idx": pad}, ids=ids.to(dt), w=w, y=y.float(), gy=gy, gw=gw.float())
    r.save(out)
