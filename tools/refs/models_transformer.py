"""References for models/transformer_blocks and models/transformer.

layer_*: torch.nn.TransformerEncoderLayer / TransformerDecoderLayer (batch_first, dropout 0,
         norm_first False/True, every activation qkv's config accepts: relu, gelu (erf), gelu_tanh,
         silu) with key-padding and causal masks: output and the gradients of sum(y * gy) w.r.t.
         inputs and every parameter, parameters in qkv's names.
model_*: token embeddings (* sqrt(d)) + positions + torch.nn.Transformer + generator Linear, the
         config as qkv's TransformerConfig JSON; logits, cross-entropy loss (ignore_index = pad)
         and the gradients of the loss w.r.t. every parameter.
"""
import json
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from qkvref import Refs


# The mapping torch -> qkv names. `get` maps a torch parameter to what is stored: the parameter
# itself, or its gradient (the packed in_proj is split after `get`, so both split the same way).
# qkv's activation names -> what torch.nn.Transformer*Layer takes (a name or a callable).
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu}


def mha_params(prefix, mha, get):
    qw, kw, vw = get(mha.in_proj_weight).chunk(3, 0)
    qb, kb, vb = get(mha.in_proj_bias).chunk(3, 0)
    return {f"{prefix}.q_proj.weight": qw, f"{prefix}.k_proj.weight": kw, f"{prefix}.v_proj.weight": vw,
            f"{prefix}.q_proj.bias": qb, f"{prefix}.k_proj.bias": kb, f"{prefix}.v_proj.bias": vb,
            f"{prefix}.out_proj.weight": get(mha.out_proj.weight), f"{prefix}.out_proj.bias": get(mha.out_proj.bias)}


def ln_params(prefix, ln, get):
    return {f"{prefix}.weight": get(ln.weight), f"{prefix}.bias": get(ln.bias)}


def layer_params(layer, get, prefix=""):
    p = {}
    p.update(mha_params(prefix + "self_attn", layer.self_attn, get))
    p.update(ln_params(prefix + "self_attn_layer_norm", layer.norm1, get))
    if hasattr(layer, "multihead_attn"):
        p.update(mha_params(prefix + "encoder_attn", layer.multihead_attn, get))
        p.update(ln_params(prefix + "encoder_attn_layer_norm", layer.norm2, get))
        p.update(ln_params(prefix + "final_layer_norm", layer.norm3, get))
    else:
        p.update(ln_params(prefix + "final_layer_norm", layer.norm2, get))
    p.update({prefix + "fc1.weight": get(layer.linear1.weight), prefix + "fc1.bias": get(layer.linear1.bias),
              prefix + "fc2.weight": get(layer.linear2.weight), prefix + "fc2.bias": get(layer.linear2.bias)})
    return p


def randomize(module, g):
    """Non-trivial biases and LayerNorm affines so that every gradient is exercised."""
    with torch.no_grad():
        for n, t in module.named_parameters():
            if n.endswith("bias"):
                t.normal_(0, 0.3, generator=g)
            elif "norm" in n and n.endswith("weight"):
                t.normal_(1, 0.3, generator=g)


def grad_getter(module, out, gy=None):
    """A `get` that maps each torch parameter of module to its gradient of sum(out * gy)."""
    ps = list(module.parameters())
    gs = torch.autograd.grad(out, ps, gy, retain_graph=True)
    table = {id(p): g for p, g in zip(ps, gs)}
    return lambda p: table[id(p)]


def padding_mask(B, T, g, min_len=1):
    lengths = torch.randint(min_len, T + 1, (B,), generator=g)
    lengths[0] = T
    return torch.arange(T).unsqueeze(0) >= lengths.unsqueeze(1)


def layer_cases(r, g):
    D, H, FF, B, T, S = 16, 4, 40, 3, 6, 7
    variants = [(k, pre, act, False) for k in ("enc", "dec") for pre in (False, True) for act in ("relu", "gelu")]
    variants.append(("enc", True, "gelu", True))  # causal self-attention only: the GPT block
    # The two activations added later, in both stacks and both norm placements (appended, so the
    # cases above keep their random draws).
    variants += [("enc", False, "gelu_tanh", False), ("enc", True, "silu", False),
                 ("dec", True, "gelu_tanh", False), ("dec", False, "silu", False)]
    for kind, pre, act, causal_enc in variants:
            if True:
                torch.manual_seed(17)
                cls = nn.TransformerEncoderLayer if kind == "enc" else nn.TransformerDecoderLayer
                layer = cls(D, H, FF, dropout=0.0, activation=ACTIVATIONS[act], batch_first=True, norm_first=pre)
                randomize(layer, g)
                # Route every parameter through qkv-named views so their gradients come out split.
                x = torch.randn(B, T, D, generator=g, requires_grad=True)
                if kind == "enc":
                    kpm = padding_mask(B, T, g)
                    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), 1) if causal_enc else None
                    y = layer(x, src_mask=causal, src_key_padding_mask=kpm)
                    extra = {"key_padding": kpm.to(torch.uint8)}
                    inputs = {"x": x}
                else:
                    mem = torch.randn(B, S, D, generator=g, requires_grad=True)
                    kpm = padding_mask(B, S, g)
                    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
                    y = layer(x, mem, tgt_mask=causal, memory_key_padding_mask=kpm)
                    extra = {"memory_padding": kpm.to(torch.uint8)}
                    inputs = {"x": x, "memory": mem}
                gy = torch.randn(y.shape, generator=g)
                gin = torch.autograd.grad(y, list(inputs.values()), gy, retain_graph=True)
                named = layer_params(layer, lambda p: p)
                gp = layer_params(layer, grad_getter(layer, y, gy))
                tensors = dict(inputs, y=y, gy=gy, **extra)
                for k, gv in zip(inputs, gin):
                    tensors["g" + k] = gv
                for n, t in named.items():
                    tensors["p." + n] = t
                    tensors["g." + n] = gp[n]
                name = f"layer_{kind}_{'pre' if pre else 'post'}_{act}{'_causal' if causal_enc else ''}"
                r.case(name, {"kind": kind, "pre_norm": pre, "activation": act, "d_model": D, "heads": H,
                              "d_ff": FF, "causal": causal_enc}, **tensors)


def sinusoid(max_len, d):
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d, 2, dtype=torch.float64) * (-math.log(10000.0) / d))
    pe = torch.zeros(max_len, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe.float()


class RefTransformer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        D = c["d_model"]
        self.src_embed = nn.Embedding(c["src_vocab"], D, padding_idx=c["pad_id"])
        self.tgt_embed = self.src_embed if c["shared_embeddings"] else nn.Embedding(c["tgt_vocab"], D,
                                                                                    padding_idx=c["pad_id"])
        if c["positional"] == "learned":
            self.src_pos = nn.Parameter(torch.randn(c["max_len"], D) * 0.3)
            self.tgt_pos = nn.Parameter(torch.randn(c["max_len"], D) * 0.3)
        else:
            self.register_buffer("pe", sinusoid(c["max_len"], D))
        self.tf = nn.Transformer(D, c["heads"], c["enc_layers"], c["dec_layers"], c["d_ff"], dropout=0.0,
                                 activation=ACTIVATIONS[c["activation"]], batch_first=True,
                                 norm_first=c["pre_norm"])
        if not c["pre_norm"]:  # qkv's post-LN stacks have no final LayerNorm (the paper, Marian)
            self.tf.encoder.norm = None
            self.tf.decoder.norm = None
        self.generator = nn.Linear(D, c["tgt_vocab"])
        if c["tie_output"]:
            self.generator.weight = self.tgt_embed.weight

    def embed(self, emb, ids, pos):
        x = emb(ids)
        if self.c["scale_embeddings"]:
            x = x * math.sqrt(self.c["d_model"])
        T = ids.shape[1]
        return x + (pos[:T] if pos is not None else self.pe[:T])

    def forward(self, src, src_pad, tgt_in):
        learned = self.c["positional"] == "learned"
        x = self.embed(self.src_embed, src, self.src_pos if learned else None)
        y = self.embed(self.tgt_embed, tgt_in, self.tgt_pos if learned else None)
        T = tgt_in.shape[1]
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        h = self.tf(x, y, tgt_mask=causal, src_key_padding_mask=src_pad, memory_key_padding_mask=src_pad)
        return self.generator(h)

    def named_qkv(self, get):
        p = {"src_embed.weight": get(self.src_embed.weight), "generator.bias": get(self.generator.bias)}
        if not self.c["shared_embeddings"]:
            p["tgt_embed.weight"] = get(self.tgt_embed.weight)
        if not self.c["tie_output"]:
            p["generator.weight"] = get(self.generator.weight)
        if self.c["positional"] == "learned":
            p["src_pos.weight"], p["tgt_pos.weight"] = get(self.src_pos), get(self.tgt_pos)
        for side, stack in (("encoder", self.tf.encoder), ("decoder", self.tf.decoder)):
            for i, layer in enumerate(stack.layers):
                p.update(layer_params(layer, get, f"{side}.layers.{i}."))
            if stack.norm is not None:
                p.update(ln_params(f"{side}.layer_norm", stack.norm, get))
        return p


MODELS = {
    "post_relu_separate": dict(src_vocab=23, tgt_vocab=19, d_model=16, heads=4, enc_layers=2, dec_layers=2, d_ff=32,
                               activation="relu", pre_norm=False, shared_embeddings=False, tie_output=False,
                               positional="sinusoidal", scale_embeddings=True),
    "pre_gelu_shared_tied": dict(src_vocab=21, tgt_vocab=21, d_model=24, heads=3, enc_layers=2, dec_layers=3,
                                 d_ff=48, activation="gelu", pre_norm=True, shared_embeddings=True,
                                 tie_output=True, positional="sinusoidal", scale_embeddings=True),
    "post_learned_unscaled_tied": dict(src_vocab=17, tgt_vocab=13, d_model=16, heads=2, enc_layers=1, dec_layers=2,
                                       d_ff=24, activation="relu", pre_norm=False, shared_embeddings=False,
                                       tie_output=True, positional="learned", scale_embeddings=False),
    "pre_silu_shared_tied": dict(src_vocab=21, tgt_vocab=21, d_model=16, heads=4, enc_layers=2, dec_layers=2,
                                 d_ff=32, activation="silu", pre_norm=True, shared_embeddings=True,
                                 tie_output=True, positional="sinusoidal", scale_embeddings=True),
    "post_gelu_tanh_separate": dict(src_vocab=19, tgt_vocab=23, d_model=16, heads=2, enc_layers=2, dec_layers=1,
                                    d_ff=24, activation="gelu_tanh", pre_norm=False, shared_embeddings=False,
                                    tie_output=False, positional="learned", scale_embeddings=True),
}


def model_cases(r, g):
    B, S, T = 3, 7, 6
    for name, c in MODELS.items():
        c = dict(c, dropout=0.0, attention_dropout=0.0, max_len=16, pad_id=0, bos_id=1, eos_id=2)
        torch.manual_seed(23)
        m = RefTransformer(c)
        randomize(m.tf, g)
        with torch.no_grad():
            m.generator.bias.normal_(0, 0.3, generator=g)
            for emb in {m.src_embed, m.tgt_embed}:
                emb.weight.mul_(0.3)
                emb.weight[c["pad_id"]] = 0
        src_pad = padding_mask(B, S, g, min_len=2)
        src = torch.randint(3, c["src_vocab"], (B, S), generator=g).masked_fill(src_pad, c["pad_id"])
        body = torch.randint(3, c["tgt_vocab"], (B, T), generator=g)
        tgt_in = torch.cat([torch.full((B, 1), c["bos_id"]), body[:, :-1]], 1)
        tgt_out = body.clone()
        tgt_out[2, -2:] = c["pad_id"]  # ignored positions
        # Cross-attention weights per decoder layer, (B, H, T, S): recomputed from each layer's inputs.
        cross = []

        def hook(mha, inputs, output):
            with torch.no_grad():
                x, mem = inputs[0], inputs[1]
                cross.append(mha.forward(x, mem, mem, key_padding_mask=src_pad, need_weights=True,
                                         average_attn_weights=False)[1])  # .forward: no hooks

        hooks = [layer.multihead_attn.register_forward_hook(hook) for layer in m.tf.decoder.layers]
        logits = m(src, src_pad, tgt_in)
        for h in hooks:
            h.remove()
        loss = F.cross_entropy(logits.reshape(-1, c["tgt_vocab"]), tgt_out.reshape(-1), ignore_index=c["pad_id"])
        named = m.named_qkv(lambda p: p)
        gp = m.named_qkv(grad_getter(m, loss))
        tensors = {"src": src, "src_pad": src_pad.to(torch.uint8), "tgt_in": tgt_in, "tgt_out": tgt_out,
                   "logits": logits, "loss": loss}
        for i, w in enumerate(cross):
            tensors[f"cross_{i}"] = w
        for n, t in named.items():
            tensors["p." + n] = t
            tensors["g." + n] = gp[n]
        r.case(f"model_{name}", {"config": c}, **tensors)


def main(out):
    g = torch.Generator().manual_seed(5)
    r = Refs()
    layer_cases(r, g)
    model_cases(r, g)
    r.save(out)
