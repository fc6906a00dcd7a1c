"""References for qkv/attention/{rnn_attention,positions}: Bahdanau (concat, sum), Luong (dot,
general, concat, location), RoPE (half, interleaved) and Shaw relative multi-head attention, written from
the papers' equations in PyTorch. Each case stores inputs, parameters ("p.<qkv name>"), upstream
gradients, outputs and all gradients (from torch.autograd)."""
import math

import torch
from qkvref import Refs

g = torch.Generator().manual_seed(11)


def rn(*s, scale=1.0):
    return (torch.randn(*s, generator=g) * scale).requires_grad_(True)


def pad_mask(B, S, lens):
    return torch.arange(S)[None, :] >= torch.tensor(lens)[:, None]  # True = pad


def align(scores, keys, pad):
    w = torch.softmax(scores.masked_fill(pad, float("-inf")), -1)
    return torch.bmm(w.unsqueeze(1), keys).squeeze(1), w


def rnn_case(r, name, kind, B=3, S=6, Ds=5, Dh=7, A=4, M=9):
    q, keys = rn(B, Ds), rn(B, S, Dh)
    lens = [6, 3, 1]
    pad = pad_mask(B, S, lens)
    P = {}
    if kind == "bahdanau_concat":
        P = {"attn.weight": rn(A, Ds + Dh, scale=0.4), "attn.bias": rn(A, scale=0.1), "v.weight": rn(1, A, scale=0.5)}
        e = torch.tanh(torch.cat([q[:, None, :].expand(B, S, Ds), keys], -1) @ P["attn.weight"].T + P["attn.bias"])
        scores = (e @ P["v.weight"].T).squeeze(-1)
    elif kind == "bahdanau_sum":
        P = {"query_proj.weight": rn(A, Ds, scale=0.4), "query_proj.bias": rn(A, scale=0.1),
             "key_proj.weight": rn(A, Dh, scale=0.4), "v.weight": rn(1, A, scale=0.5)}
        e = torch.tanh((q @ P["query_proj.weight"].T + P["query_proj.bias"])[:, None, :] + keys @ P["key_proj.weight"].T)
        scores = (e @ P["v.weight"].T).squeeze(-1)
    elif kind == "luong_dot":
        keys = rn(B, S, Ds)
        scores = torch.einsum("bd,bsd->bs", q, keys)
    elif kind == "luong_general":
        P = {"attn.weight": rn(Ds, Dh, scale=0.4)}
        scores = torch.einsum("bd,bsd->bs", q, keys @ P["attn.weight"].T)
    elif kind == "luong_concat":
        P = {"attn.weight": rn(A, Ds + Dh, scale=0.4), "attn.bias": rn(A, scale=0.1), "v.weight": rn(1, A, scale=0.5)}
        e = torch.tanh(torch.cat([q[:, None, :].expand(B, S, Ds), keys], -1) @ P["attn.weight"].T + P["attn.bias"])
        scores = (e @ P["v.weight"].T).squeeze(-1)
    elif kind == "luong_location":  # Luong et al. 2015, 3.1: a = softmax(W_a h_t), W_a (M, Ds), positions 0..S-1
        P = {"attn.weight": rn(M, Ds, scale=0.4)}
        scores = (q @ P["attn.weight"].T)[:, :S]
    ctx, w = align(scores, keys, pad)
    gc, gw = torch.randn(ctx.shape, generator=g), torch.randn(w.shape, generator=g)
    leaves = [q, keys] + list(P.values())
    grads = torch.autograd.grad((ctx * gc).sum() + (w * gw).sum(), leaves)
    t = dict(query=q, keys=keys, pad=pad, context=ctx, weights=w, g_context=gc, g_weights=gw,
             g_query=grads[0], g_keys=grads[1])
    for (k, v), gr in zip(P.items(), grads[2:]):
        t["p." + k] = v
        t["g." + k] = gr
    r.case(name, {"kind": kind, "Ds": q.shape[1], "Dh": keys.shape[2], "A": A, "M": M}, **t)


def rope_ref(x, offset, base, style):
    B, H, T, D = x.shape
    half = D // 2
    theta = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / D)
    ang = (torch.arange(offset, offset + T, dtype=torch.float64)[:, None] * theta[None, :])
    cos, sin = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    if style == "half":
        a, b = x[..., :half], x[..., half:]
        return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, b * cos + a * sin], -1).reshape(B, H, T, D)


def rel_mha(r, name, B, Tq, Tk, D, H, k, causal, lens):
    Dh = D // H
    x_kv = rn(B, Tk, D)
    xq = x_kv[:, Tk - Tq:, :] if Tq <= Tk else rn(B, Tq, D)
    names = ["q_proj", "k_proj", "v_proj", "out_proj"]
    P = {}
    for n in names:
        P[n + ".weight"] = rn(D, D, scale=1 / math.sqrt(D))
        P[n + ".bias"] = rn(D, scale=0.1)
    P["rel_k"], P["rel_v"] = rn(2 * k + 1, Dh, scale=0.5), rn(2 * k + 1, Dh, scale=0.5)
    lin = lambda x, n: x @ P[n + ".weight"].T + P[n + ".bias"]
    sh = lambda x, T: x.view(B, T, H, Dh).transpose(1, 2)
    q, kk, v = sh(lin(xq, "q_proj"), Tq), sh(lin(x_kv, "k_proj"), Tk), sh(lin(x_kv, "v_proj"), Tk)
    i = torch.arange(Tq)[:, None] + (Tk - Tq)
    j = torch.arange(Tk)[None, :]
    idx = (j - i).clamp(-k, k) + k
    ak, av = P["rel_k"][idx], P["rel_v"][idx]  # (Tq, Tk, Dh)
    e = (q @ kk.transpose(-1, -2) + torch.einsum("bhid,ijd->bhij", q, ak)) / math.sqrt(Dh)
    mask = torch.zeros(B, 1, Tq, Tk, dtype=torch.bool)
    if causal:
        mask |= (j > i)[None, None]
    if lens is not None:
        mask |= pad_mask(B, Tk, lens)[:, None, None, :]
    w = torch.softmax(e.masked_fill(mask, float("-inf")), -1)
    z = w @ v + torch.einsum("bhij,ijd->bhid", w, av)
    out = lin(z.transpose(1, 2).reshape(B, Tq, D), "out_proj")
    go, gw = torch.randn(out.shape, generator=g), torch.randn(w.shape, generator=g)
    leaves = [x_kv] + list(P.values()) + ([xq] if Tq > Tk else [])
    grads = torch.autograd.grad((out * go).sum() + (w * gw).sum(), leaves, allow_unused=True)
    t = dict(x=x_kv, out=out, weights=w, g_out=go, g_weights=gw, g_x=grads[0])
    if lens is not None:
        t["pad"] = pad_mask(B, Tk, lens)
    for (n, v_), gr in zip(P.items(), grads[1:]):
        t["p." + n], t["g." + n] = v_, gr
    r.case(name, {"heads": H, "k": k, "Tq": Tq, "causal": causal}, **t)


def main(out):
    r = Refs()
    for kind in ["bahdanau_concat", "bahdanau_sum", "luong_dot", "luong_general", "luong_concat"]:
        rnn_case(r, kind, kind)
    for style in ["half", "interleaved"]:
        for n, (shape, offset) in enumerate([((2, 3, 5, 8), 0), ((1, 2, 4, 16), 7)]):
            x = rn(*shape)
            y = rope_ref(x, offset, 10000.0, style)
            gy = torch.randn(y.shape, generator=g)
            (gx,) = torch.autograd.grad((y * gy).sum(), [x])
            r.case(f"rope_{style}_{n}", {"style": style, "offset": offset}, x=x, y=y, gy=gy, gx=gx)
    rel_mha(r, "rel_self", 2, 6, 6, 16, 2, 3, False, [6, 4])
    rel_mha(r, "rel_causal", 2, 7, 7, 12, 3, 2, True, None)
    rel_mha(r, "rel_incremental", 1, 2, 8, 8, 2, 3, True, None)  # last 2 queries over 8 keys
    # Drawn last so that the cases above keep their values. W_a has 9 rows for a 6-long source: the
    # gradient of rows 6..8 is zero, and rows 3..5 (row 1) and 1..5 (row 2) are masked padding.
    rnn_case(r, "luong_location", "luong_location")
    r.save(out)
