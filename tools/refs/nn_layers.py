"""References for nn/layers and nn/positional: Linear, Embedding (padding_idx, sqrt(d) scaling),
LayerNorm, PositionwiseFFN (relu, gelu, silu) forward + all gradients, and the sinusoidal table
of the PyTorch tutorial (interleaved) and of fairseq/Marian (sines then cosines)."""
import math

import torch
import torch.nn.functional as F
from qkvref import Refs, grads


def sinusoid_tutorial(max_len, d, dtype):
    # pytorch.org "Language modeling with nn.Transformer" PositionalEncoding, in `dtype`.
    position = torch.arange(max_len, dtype=dtype).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d, 2, dtype=dtype) * (-math.log(10000.0) / d))
    pe = torch.zeros(max_len, d, dtype=dtype)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def main(out):
    g = torch.Generator().manual_seed(3)
    r = Refs()

    for i, (shape, din, dout, bias) in enumerate([((2, 5), 7, 3, True), ((2, 3, 16), 16, 24, True),
                                                   ((4, 8), 8, 5, False), ((1, 1, 1), 1, 1, True)]):
        x = torch.randn(*shape[:-1], din, generator=g, requires_grad=True)
        w = torch.randn(dout, din, generator=g, requires_grad=True)
        b = torch.randn(dout, generator=g, requires_grad=True) if bias else None
        y = F.linear(x, w, b)
        gy = torch.randn(y.shape, generator=g)
        gs = grads(y, [x, w] + ([b] if bias else []), gy)
        r.case(f"linear_{i}", {"bias": bias}, x=x, w=w, b=b, y=y, gy=gy, gx=gs[0], gw=gs[1],
               gb=gs[2] if bias else None)

    for i, (V, D, pad, scale) in enumerate([(11, 6, -1, False), (11, 6, 0, False), (13, 8, 3, True), (5, 4, -1, True)]):
        w = torch.randn(V, D, generator=g)
        if pad >= 0:
            w[pad] = 0
        w.requires_grad_(True)
        ids = torch.randint(0, V, (3, 7), generator=g)
        if pad >= 0:
            ids[0, -2:] = pad
        ids[1, 0] = ids[1, 1]  # a repeated id accumulates
        y = F.embedding(ids, w, padding_idx=pad if pad >= 0 else None)
        if scale:
            y = y * math.sqrt(D)
        gy = torch.randn(y.shape, generator=g)
        (gw,) = grads(y, [w], gy)
        r.case(f"embedding_{i}", {"padding_idx": pad, "scale": scale}, ids=ids, w=w, y=y, gy=gy, gw=gw)

    for i, (shape, eps) in enumerate([((4, 10), 1e-5), ((2, 3, 32), 1e-6), ((3, 512), 1e-5)]):
        x = (torch.randn(shape, generator=g) * 3 + 1).requires_grad_(True)
        w = (torch.randn(shape[-1], generator=g) * 0.5 + 1).requires_grad_(True)
        b = torch.randn(shape[-1], generator=g).requires_grad_(True)
        y = F.layer_norm(x, (shape[-1],), w, b, eps)
        gy = torch.randn(y.shape, generator=g)
        gx, gw, gb = grads(y, [x, w, b], gy)
        r.case(f"layernorm_{i}", {"eps": eps}, x=x, w=w, b=b, y=y, gy=gy, gx=gx, gw=gw, gb=gb)

    acts = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh")}
    for name, act in acts.items():
        D, FF = 12, 40
        x = torch.randn(2, 5, D, generator=g, requires_grad=True)
        w1 = (torch.randn(FF, D, generator=g) / math.sqrt(D)).requires_grad_(True)
        b1 = torch.randn(FF, generator=g).requires_grad_(True)
        w2 = (torch.randn(D, FF, generator=g) / math.sqrt(FF)).requires_grad_(True)
        b2 = torch.randn(D, generator=g).requires_grad_(True)
        y = F.linear(act(F.linear(x, w1, b1)), w2, b2)
        gy = torch.randn(y.shape, generator=g)
        gx, gw1, gb1, gw2, gb2 = grads(y, [x, w1, b1, w2, b2], gy)
        r.case(f"ffn_{name}", {"activation": name}, x=x, w1=w1, b1=b1, w2=w2, b2=b2, y=y, gy=gy, gx=gx,
               gw1=gw1, gb1=gb1, gw2=gw2, gb2=gb2)

    for max_len, d in [(50, 16), (128, 64), (7, 2)]:
        exact = sinusoid_tutorial(max_len, d, torch.float64)
        halves = torch.cat([exact[:, 0::2], exact[:, 1::2]], dim=1)  # fairseq / HF Marian layout
        r.case(f"sinusoid_{max_len}_{d}", {"max_len": max_len, "d": d}, interleaved=exact.float(),
               interleaved_f32_tutorial=sinusoid_tutorial(max_len, d, torch.float32), halves=halves.float())
    r.save(out)
