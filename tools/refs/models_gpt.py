"""References for models/gpt and the GPT-2 checkpoint layout (io/gpt2).

A GPT written here in plain PyTorch from the papers (Radford et al. 2018, 2019) and the layout of
the published GPT-2 checkpoints (Hugging Face's GPT2LMHeadModel state dict):
  wte (V, D), wpe (P, D), h.{i}.ln_1, h.{i}.attn.c_attn (Conv1D: weight (D, 3D) stored (in, out),
  columns [q | k | v]), h.{i}.attn.c_proj (D, D), h.{i}.ln_2, h.{i}.mlp.c_fc (D, 4D),
  h.{i}.mlp.c_proj (4D, D), ln_f; logits = ln_f(h) @ wte^T (lm_head tied, not stored).
GPT-2 (pre-LN):  x = x + attn(ln_1(x));  x = x + mlp(ln_2(x));  ln_f at the end.
GPT-1 (post-LN): x = ln_1(x + attn(x));  x = ln_2(x + mlp(x));  no ln_f.
Attention is causal, scaled by 1/sqrt(Dh), with padding keys masked; GELU is the tanh
approximation ("gelu_new").

Each case writes a model directory next to the reference file, <out dir>/models_gpt/<case>/
(config.json with GPT2Config keys + model.safetensors in the published layout, random weights),
and stores in the reference file: ids (B, T), key_pad (B, T) u8 (1 = padding), position_ids
(B, T), logits (B, T, V) and the loss (mean cross-entropy of next-token prediction over the
non-padding targets) with its gradient for every parameter, by published name.
Rows: one full row, one right-padded, one left-padded (positions counted from its first token,
as generation does).
Case "strided" (the gpt2 model): a 40-token text scored in windows of the context length
(n_positions = 12) moved by a stride of 5: window k covers [5k, 5k + 12) and scores the tokens
after the previous window's end, each token from position 1 on exactly once, with the longest
context the window gives it; stores the summed negative log-likelihood and the token count.
"""
import json
import math
import os

import torch
import torch.nn.functional as F
from qkvref import Refs, save_safetensors


def init_params(cfg, gen):
    V, P, D, L = cfg["vocab_size"], cfg["n_positions"], cfg["n_embd"], cfg["n_layer"]
    inner = cfg.get("n_inner") or 4 * D

    def rnd(*shape, std=0.3):
        return torch.randn(*shape, generator=gen) * std

    p = {"wte.weight": rnd(V, D), "wpe.weight": rnd(P, D, std=0.1)}
    for i in range(L):
        h = f"h.{i}."
        p.update({h + "ln_1.weight": 1 + rnd(D, std=0.1), h + "ln_1.bias": rnd(D, std=0.1),
                  h + "attn.c_attn.weight": rnd(D, 3 * D, std=D ** -0.5), h + "attn.c_attn.bias": rnd(3 * D, std=0.1),
                  h + "attn.c_proj.weight": rnd(D, D, std=D ** -0.5), h + "attn.c_proj.bias": rnd(D, std=0.1),
                  h + "ln_2.weight": 1 + rnd(D, std=0.1), h + "ln_2.bias": rnd(D, std=0.1),
                  h + "mlp.c_fc.weight": rnd(D, inner, std=D ** -0.5), h + "mlp.c_fc.bias": rnd(inner, std=0.1),
                  h + "mlp.c_proj.weight": rnd(inner, D, std=inner ** -0.5), h + "mlp.c_proj.bias": rnd(D, std=0.1)})
    if cfg["pre_norm"]:
        p.update({"ln_f.weight": 1 + rnd(D, std=0.1), "ln_f.bias": rnd(D, std=0.1)})
    return {k: v.double().float().requires_grad_(True) for k, v in p.items()}


def conv1d(x, w, b):  # the published Conv1D: y = x @ w + b with w stored (in, out)
    return x @ w + b


def act(cfg, x):
    a = cfg["activation_function"]
    return {"gelu_new": lambda t: F.gelu(t, approximate="tanh"), "gelu": F.gelu, "relu": F.relu}[a](x)


def gpt_forward(cfg, p, ids, key_pad, pos):
    return gpt_hidden(cfg, p, ids, key_pad, pos) @ p["wte.weight"].t()  # (B, T, V)


def gpt_hidden(cfg, p, ids, key_pad, pos):  # the last hidden states (B, T, D), after ln_f
    B, T = ids.shape
    D, H, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    Dh = D // H
    ln = lambda x, n: F.layer_norm(x, (D,), p[n + ".weight"], p[n + ".bias"], eps)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    allowed = causal[None, None] & ~key_pad.bool()[:, None, None, :]  # (B, 1, T, T)

    def attn(x, h):
        q, k, v = conv1d(x, p[h + "attn.c_attn.weight"], p[h + "attn.c_attn.bias"]).split(D, dim=2)
        q, k, v = (t.view(B, T, H, Dh).transpose(1, 2) for t in (q, k, v))  # (B, H, T, Dh)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(Dh)
        s = s.masked_fill(~allowed, float("-inf"))
        w = torch.softmax(s, dim=-1).nan_to_num(0.0)  # a fully masked (padding) row: zeros
        z = (w @ v).transpose(1, 2).reshape(B, T, D)
        return conv1d(z, p[h + "attn.c_proj.weight"], p[h + "attn.c_proj.bias"])

    def mlp(x, h):
        u = act(cfg, conv1d(x, p[h + "mlp.c_fc.weight"], p[h + "mlp.c_fc.bias"]))
        return conv1d(u, p[h + "mlp.c_proj.weight"], p[h + "mlp.c_proj.bias"])

    x = p["wte.weight"][ids] + p["wpe.weight"][pos]
    for i in range(cfg["n_layer"]):
        h = f"h.{i}."
        if cfg["pre_norm"]:
            x = x + attn(ln(x, h + "ln_1"), h)
            x = x + mlp(ln(x, h + "ln_2"), h)
        else:
            x = ln(x + attn(x, h), h + "ln_1")
            x = ln(x + mlp(x, h), h + "ln_2")
    if cfg["pre_norm"]:
        x = ln(x, "ln_f")
    return x


def batch(gen, V, T):
    ids = torch.randint(0, V, (3, T), generator=gen)
    key_pad = torch.zeros(3, T, dtype=torch.uint8)
    key_pad[1, T - 3:] = 1  # right padding
    key_pad[2, :2] = 1      # left padding
    pos = (torch.cumsum(1 - key_pad.long(), dim=1) - 1).clamp(min=0)
    pos[1] = torch.arange(T)  # right padding: positions as usual
    return ids, key_pad, pos


def write_dir(d, cfg, params, prefix="", buffers=False):
    os.makedirs(d, exist_ok=True)
    sd = {prefix + k: v for k, v in params.items()}
    if buffers:  # the published files also hold the causal-mask buffers, which loaders ignore
        P = cfg["n_positions"]
        for i in range(cfg["n_layer"]):
            sd[f"{prefix}h.{i}.attn.bias"] = torch.ones(P, P, dtype=torch.uint8).tril().view(1, 1, P, P)
            sd[f"{prefix}h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    save_safetensors(os.path.join(d, "model.safetensors"), sd, {"format": "pt"})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({k: v for k, v in cfg.items() if not (k == "pre_norm" and v)}, f, indent=2)


def main(out):
    refs = Refs()
    root = os.path.join(os.path.dirname(out), "models_gpt")
    base = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 61, "n_positions": 12,
            "n_embd": 32, "n_layer": 2, "n_head": 4, "n_inner": None, "activation_function": "gelu_new",
            "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1,
            "bos_token_id": 0, "eos_token_id": 0, "initializer_range": 0.02, "pre_norm": True}
    cases = {
        "gpt2": dict(base),                                     # published layout, no prefix, mask buffers
        "gpt2_prefixed": dict(base, n_inner=48),                # transformer. prefix (save_pretrained)
        "gpt1_post_ln": dict(base, pre_norm=False, activation_function="gelu"),
    }
    for c, cfg in cases.items():
        gen = torch.Generator().manual_seed(len(c) * 7919)
        p = init_params(cfg, gen)
        ids, key_pad, pos = batch(gen, cfg["vocab_size"], 9)
        logits = gpt_forward(cfg, p, ids, key_pad, pos)
        # next-token loss over targets that are real tokens following a real token
        tgt = ids[:, 1:].clone()
        keep = (key_pad[:, 1:] == 0) & (key_pad[:, :-1] == 0)
        tgt[~keep] = -100
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, cfg["vocab_size"]), tgt.reshape(-1), ignore_index=-100)
        names = sorted(p)
        gs = torch.autograd.grad(loss, [p[n] for n in names])
        write_dir(os.path.join(root, c), cfg, {k: v.detach() for k, v in p.items()},
                  prefix="transformer." if c == "gpt2_prefixed" else "", buffers=c == "gpt2")
        tensors = {"ids": ids, "key_pad": key_pad, "position_ids": pos, "targets": tgt,
                   "logits": logits.detach(), "loss": loss.detach()}
        tensors.update({"grad." + n: g for n, g in zip(names, gs)})
        refs.case(c, {"dir": os.path.join("models_gpt", c), "pre_norm": cfg["pre_norm"]}, **tensors)
    # strided perplexity on the gpt2 model
    cfg = cases["gpt2"]
    p = {k: v.detach().double() for k, v in init_params(cfg, torch.Generator().manual_seed(len("gpt2") * 7919)).items()}
    gen = torch.Generator().manual_seed(5)
    text = torch.randint(0, cfg["vocab_size"], (40,), generator=gen)
    ctx, stride, total, count, prev_end = cfg["n_positions"], 5, 0.0, 0, 1
    for begin in range(0, len(text), stride):
        end = min(begin + ctx, len(text))
        w = text[begin:end][None]
        logp = torch.log_softmax(gpt_forward(cfg, p, w, torch.zeros_like(w, dtype=torch.uint8),
                                             torch.arange(end - begin)[None]), -1)[0]  # (L, V)
        for i in range(max(prev_end, begin + 1), end):  # token i predicted by position i - 1
            total -= logp[i - 1 - begin, text[i]].item()
            count += 1
        prev_end = end
        if end == len(text):
            break
    refs.case("strided", {"dir": os.path.join("models_gpt", "gpt2"), "context": ctx, "stride": stride,
                          "count": count}, text=text, total_nll=torch.tensor(total, dtype=torch.float64))
    refs.save(out)
