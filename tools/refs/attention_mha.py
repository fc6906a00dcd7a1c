"""References for attention/multihead: torch.nn.MultiheadAttention (batch_first=True) with the
packed in_proj split into q_proj / k_proj / v_proj (Hugging Face names), for self- and
cross-attention, key-padding and causal masks, kdim/vdim != d_model and no bias. Forward output,
per-head weights (average_attn_weights=False) and the gradients of sum(out * gy) w.r.t. the
query/key/value inputs and every parameter."""
import torch
from qkvref import Refs, grads


def split_params(mha):
    """Our names -> tensors (q/k/v/out_proj.{weight,bias})."""
    p = {}
    if mha._qkv_same_embed_dim:
        qw, kw, vw = mha.in_proj_weight.chunk(3, 0)
    else:
        qw, kw, vw = mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight
    p["q_proj.weight"], p["k_proj.weight"], p["v_proj.weight"] = qw, kw, vw
    if mha.in_proj_bias is not None:
        qb, kb, vb = mha.in_proj_bias.chunk(3, 0)
        p["q_proj.bias"], p["k_proj.bias"], p["v_proj.bias"] = qb, kb, vb
        p["out_proj.bias"] = mha.out_proj.bias
    p["out_proj.weight"] = mha.out_proj.weight
    return p


def main(out):
    g = torch.Generator().manual_seed(11)
    r = Refs()
    cases = [
        # name, D, H, B, Tq, Tk, self, key_padding, causal, bias, kdim, vdim
        ("self_plain", 16, 4, 2, 5, 5, True, False, False, True, None, None),
        ("self_keypad", 16, 4, 3, 6, 6, True, True, False, True, None, None),
        ("self_causal", 24, 3, 2, 7, 7, True, False, True, True, None, None),
        ("self_causal_keypad", 32, 8, 2, 9, 9, True, True, True, True, None, None),
        ("self_nobias", 16, 2, 2, 4, 4, True, False, True, False, None, None),
        ("cross_keypad", 16, 4, 3, 4, 7, False, True, False, True, None, None),
        ("cross_plain_one_query", 20, 5, 2, 1, 6, False, False, False, True, None, None),
        ("cross_kdim_vdim", 16, 4, 2, 3, 5, False, True, False, True, 10, 6),
        ("self_one_head_long", 8, 1, 1, 33, 33, True, False, True, True, None, None),
    ]
    for name, D, H, B, Tq, Tk, is_self, keypad, causal, bias, kdim, vdim in cases:
        torch.manual_seed(len(name))
        mha = torch.nn.MultiheadAttention(D, H, dropout=0.0, bias=bias, batch_first=True, kdim=kdim, vdim=vdim)
        with torch.no_grad():  # non-zero biases so their gradients are exercised
            for n, p in mha.named_parameters():
                if "bias" in n:
                    p.normal_(0, 0.5, generator=g)
        q = torch.randn(B, Tq, D, generator=g, requires_grad=True)
        if is_self:
            k = v = q
        else:
            k = torch.randn(B, Tk, kdim or D, generator=g, requires_grad=True)
            v = torch.randn(B, Tk, vdim or D, generator=g, requires_grad=True)
        kpm = None
        if keypad:
            lengths = torch.randint(1, Tk + 1, (B,), generator=g)
            lengths[0] = Tk  # one full row
            if B > 1:
                lengths[1] = max(1, Tk - 3)
            kpm = torch.arange(Tk).unsqueeze(0) >= lengths.unsqueeze(1)  # True = padding
        am = torch.triu(torch.ones(Tq, Tk, dtype=torch.bool), 1) if causal else None
        y, w = mha(q, k, v, key_padding_mask=kpm, attn_mask=am, need_weights=True, average_attn_weights=False)
        gy = torch.randn(y.shape, generator=g)
        params = split_params(mha)
        leaves = [q] + ([] if is_self else [k, v]) + list(mha.parameters())
        gs = dict(zip(["q"] + ([] if is_self else ["k", "v"]) + [n for n, _ in mha.named_parameters()],
                      grads(y, leaves, gy)))
        # Parameter gradients in our names.
        pg = {}
        if mha._qkv_same_embed_dim:
            pg["q_proj.weight"], pg["k_proj.weight"], pg["v_proj.weight"] = gs["in_proj_weight"].chunk(3, 0)
        else:
            pg["q_proj.weight"], pg["k_proj.weight"], pg["v_proj.weight"] = (gs["q_proj_weight"], gs["k_proj_weight"],
                                                                             gs["v_proj_weight"])
        if bias:
            pg["q_proj.bias"], pg["k_proj.bias"], pg["v_proj.bias"] = gs["in_proj_bias"].chunk(3, 0)
            pg["out_proj.bias"] = gs["out_proj.bias"]
        pg["out_proj.weight"] = gs["out_proj.weight"]
        tensors = {"query": q, "out": y, "weights": w, "gy": gy, "gquery": gs["q"]}
        if not is_self:
            tensors.update(key=k, value=v, gkey=gs["k"], gvalue=gs["v"])
        if keypad:
            tensors["key_padding"] = kpm.to(torch.uint8)
        for n, t in params.items():
            tensors["p." + n] = t
            tensors["g." + n] = pg[n]
        r.case(name, {"d_model": D, "heads": H, "self": is_self, "causal": causal, "bias": bias,
                      "kdim": kdim or D, "vdim": vdim or D}, **tensors)
    r.save(out)
