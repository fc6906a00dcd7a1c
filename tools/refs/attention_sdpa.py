"""References for attention/sdpa: softmax(Q K^T * scale + mask) V written out in torch (1.13 has no
F.scaled_dot_product_attention), gradients by autograd. Computed in float64 from float32 inputs
and stored as float64, so the same case checks qkv's f32 path (at f32 tolerance) and its f64 path
(at f64 tolerance).

Masks: causal aligned at the end (j <= i + Tk - Tq), key padding (bool (B, Tk) or lengths (B)),
bool mask (true = masked) and additive float mask, alone and combined, plus fully masked rows
(which must give zeros and zero gradients, where plain torch softmax gives NaN).

Dropout cases use qkv's documented mask: element n of (B, H, Tq, Tk) is dropped iff
u < p, u = (philox4x32_10(key=seed, counter=offset + n // 4)[n % 4] >> 8) / 2^24. Philox is
implemented here from the published algorithm (Salmon et al. 2011) and checked against the
Random123 known-answer vector, independently of qkv's C++ code."""
import numpy as np
import torch
from qkvref import Refs, grads

# ---------------------------------------------------------------- Philox4x32-10 (numpy)
M0, M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
W0, W1 = 0x9E3779B9, 0xBB67AE85
MASK32 = np.uint64(0xFFFFFFFF)


def philox4x32_10(key, counters):
    """counters: uint64 array of 128-bit counters' low words (high word 0). Returns (n, 4) uint32."""
    c = np.asarray(counters, dtype=np.uint64)
    x0, x1 = c & MASK32, c >> np.uint64(32)
    x2 = np.zeros_like(c)
    x3 = np.zeros_like(c)
    k0, k1 = key & 0xFFFFFFFF, (key >> 32) & 0xFFFFFFFF
    for _ in range(10):
        p0, p1 = M0 * x0, M1 * x2  # < 2^64: exact in uint64
        hi0, lo0 = p0 >> np.uint64(32), p0 & MASK32
        hi1, lo1 = p1 >> np.uint64(32), p1 & MASK32
        x0, x1, x2, x3 = hi1 ^ x1 ^ np.uint64(k0), lo1, hi0 ^ x3 ^ np.uint64(k1), lo0
        k0, k1 = (k0 + W0) & 0xFFFFFFFF, (k1 + W1) & 0xFFFFFFFF
    return np.stack([x0, x1, x2, x3], axis=1).astype(np.uint32)


def _philox_kat():
    # Random123 kat_vectors: philox4x32 10 rounds, counter 0, key 0.
    r = philox4x32_10(0, [0])[0]
    assert [int(v) for v in r] == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8], [hex(v) for v in r]


def dropout_multipliers(shape, p, seed, offset):
    n = int(np.prod(shape))
    idx = np.arange(n, dtype=np.uint64)
    blocks = philox4x32_10(seed, np.uint64(offset) + idx // np.uint64(4))
    r = blocks[np.arange(n), (idx % np.uint64(4)).astype(np.int64)]
    u = (r >> np.uint32(8)).astype(np.float64) / 16777216.0
    keep = u >= p
    return torch.from_numpy(np.where(keep, 1.0 / (1.0 - p), 0.0).reshape(shape))


# ---------------------------------------------------------------- reference attention
def sdpa_ref(q, k, v, scale, causal=False, key_padding=None, key_lengths=None, mask=None, z=None):
    B, H, Tq, _ = q.shape
    Tk = k.shape[2]
    s = q @ k.transpose(-1, -2) * scale  # (B, H, Tq, Tk)
    masked = torch.zeros(B, H, Tq, Tk, dtype=torch.bool)
    if mask is not None:
        if mask.dtype == torch.bool:
            masked = masked | mask
        else:
            s = s + mask
    if key_padding is not None:
        masked = masked | key_padding[:, None, None, :]
    if key_lengths is not None:
        masked = masked | (torch.arange(Tk)[None, :] >= key_lengths[:, None])[:, None, None, :]
    if causal:
        i = torch.arange(Tq)[:, None]
        j = torch.arange(Tk)[None, :]
        masked = masked | (j > i + (Tk - Tq))
    s = s.masked_fill(masked, float("-inf"))
    full = torch.isneginf(s).all(-1, keepdim=True)  # fully masked rows -> zeros
    p = torch.softmax(s.masked_fill(full, 0.0), dim=-1).masked_fill(full, 0.0)
    pd = p * z if z is not None else p
    return pd @ v, p


SHAPES = [  # B, H, Tq, Tk, Dh, Dv
    (1, 1, 5, 5, 16, 16),
    (2, 3, 7, 11, 32, 32),
    (3, 2, 13, 9, 64, 64),
    (2, 4, 33, 70, 80, 80),
    (1, 2, 130, 67, 16, 24),
    (2, 2, 1, 9, 32, 32),
]
MASKS = ["none", "causal", "keypad", "keylen", "additive", "bool", "combined", "fullpad"]


def make_mask(kind, B, H, Tq, Tk, g):
    m = {}
    if kind in ("causal", "combined"):
        m["causal"] = True
    if kind in ("keypad", "combined", "fullpad"):
        kp = torch.rand(B, Tk, generator=g) < 0.3
        kp[:, 0] = False
        if kind == "fullpad":
            kp[0, :] = True  # batch 0: every key padded -> all its rows fully masked
        m["key_padding"] = kp
    if kind == "keylen":
        m["key_lengths"] = torch.randint(1, Tk + 1, (B,), generator=g)
        m["key_lengths"][0] = Tk
    if kind == "additive":
        m["mask"] = torch.randn(B, 1, Tq, Tk, generator=g)
    if kind == "combined":
        a = torch.randn(Tq, Tk, generator=g)
        a[torch.rand(Tq, Tk, generator=g) < 0.2] = float("-inf")
        m["mask"] = a
    if kind == "bool":
        bm = torch.rand(B, H, Tq, Tk, generator=g) < 0.3
        bm[..., 0, :] = True  # query row 0 fully masked
        m["mask"] = bm
    if kind == "fullpad" and B > 1:
        bm = torch.zeros(Tq, Tk, dtype=torch.bool)
        bm[Tq - 1, :] = True  # last query row of every batch fully masked
        m["mask"] = bm
    return m


def main(out):
    _philox_kat()
    g = torch.Generator().manual_seed(3)
    r = Refs()
    for si, (B, H, Tq, Tk, Dh, Dv) in enumerate(SHAPES):
        for kind in MASKS:
            q = torch.randn(B, H, Tq, Dh, generator=g)
            k = torch.randn(B, H, Tk, Dh, generator=g)
            v = torch.randn(B, H, Tk, Dv, generator=g)
            m = make_mask(kind, B, H, Tq, Tk, g)
            scale = Dh ** -0.5 if si % 2 == 0 else 0.3  # default and explicit scales
            q64, k64, v64 = (t.double().requires_grad_(True) for t in (q, k, v))
            mask64 = m.get("mask")
            if mask64 is not None and mask64.dtype != torch.bool:
                mask64 = mask64.double()
            o, p = sdpa_ref(q64, k64, v64, scale, m.get("causal", False), m.get("key_padding"),
                            m.get("key_lengths"), mask64)
            gy = torch.randn(o.shape, generator=g)
            dq, dk, dv = grads(o, [q64, k64, v64], gy.double())
            params = {"scale": scale, "default_scale": si % 2 == 0, "causal": m.get("causal", False)}
            r.case(f"s{si}_{kind}", params, q=q, k=k, v=v, out=o, weights=p, gy=gy, dq=dq, dk=dk, dv=dv,
                   key_padding=m.get("key_padding"), key_lengths=m.get("key_lengths"), mask=m.get("mask"))
    # dropout: the mask from Philox(seed, offset) as documented in kernels/attention.h
    for di, (B, H, Tq, Tk, D, kind, p, seed, offset) in enumerate([
            (2, 2, 9, 13, 16, "none", 0.3, 1234, 5), (1, 3, 70, 70, 32, "combined", 0.1, 99, 0),
            (2, 1, 17, 65, 24, "fullpad", 0.5, 7, 1001)]):
        q = torch.randn(B, H, Tq, D, generator=g)
        k = torch.randn(B, H, Tk, D, generator=g)
        v = torch.randn(B, H, Tk, D, generator=g)
        m = make_mask(kind, B, H, Tq, Tk, g)
        z = dropout_multipliers((B, H, Tq, Tk), p, seed, offset)
        q64, k64, v64 = (t.double().requires_grad_(True) for t in (q, k, v))
        mask64 = m.get("mask")
        if mask64 is not None and mask64.dtype != torch.bool:
            mask64 = mask64.double()
        o, pr = sdpa_ref(q64, k64, v64, D ** -0.5, m.get("causal", False), m.get("key_padding"), None, mask64, z)
        gy = torch.randn(o.shape, generator=g)
        dq, dk, dv = grads(o, [q64, k64, v64], gy.double())
        r.case(f"dropout{di}", {"p": p, "seed": seed, "offset": offset, "causal": m.get("causal", False)},
               q=q, k=k, v=v, out=o, weights=pr, gy=gy, dq=dq, dk=dk, dv=dv, z=z,
               key_padding=m.get("key_padding"), mask=m.get("mask"))
    r.save(out)
