"""References for models/transformer_blocks and models/transformer.

layer_*: torch.nn.TransformerEncoderLayer / TransformerDecoderLayer (batch_first, dropout 0,
         norm_first False/True, every activation qkv's config accepts: relu, gelu (erf), gelu_tanh,
         silu) with key-padding and causal masks: output and the gradients of sum(y * gy) w.r.t.
         inputs and every parameter, parameters in qkv's names.
model_*: token embeddings (* sqrt(d)) + positions + torch.nn.Transformer + generator Linear, the
         config as qkv's TransformerConfig JSON; logits, cross-entropy loss (ignore_index = pad)
         and the gradients of the loss w.r.t. every parameter.
         Relative (Shaw et al. 2018) and rotary (Su et al. 2021) positions live inside the
         self-attention, which torch.nn.MultiheadAttention cannot express: those models
         (POSITIONAL_MODELS, PosTransformer) are written here in plain torch from the papers, with
         modules named as qkv's parameters.
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


# ---------------------------------------------------------------- relative and rotary positions

def rope_rotate(x, offset, base, style):
    """RoFormer (Su et al. 2021, eq. 34): channel pair c of the vector at position p is rotated by
    p * base^(-2c/Dh). x (B, H, T, Dh). interleaved: pairs (2c, 2c+1) as complex numbers; half:
    pairs (c, c + Dh/2) (GPT-NeoX's layout of the same rotation)."""
    B, H, T, Dh = x.shape
    theta = base ** (-torch.arange(0, Dh, 2, dtype=torch.float64) / Dh)        # (Dh/2)
    angle = torch.arange(offset, offset + T, dtype=torch.float64)[:, None] * theta  # (T, Dh/2)
    if style == "interleaved":
        rot = torch.polar(torch.ones_like(angle), angle).to(torch.complex64 if x.dtype == torch.float32
                                                           else torch.complex128)
        z = torch.view_as_complex(x.reshape(B, H, T, Dh // 2, 2).contiguous()) * rot
        return torch.view_as_real(z).reshape(B, H, T, Dh)
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    a, b = x[..., : Dh // 2], x[..., Dh // 2:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], -1)


class PosAttention(nn.Module):
    """Multi-head attention (Vaswani et al. 3.2.2) with, in self-attention, Shaw et al.'s relative
    key/value vectors (one table per layer, shared by the heads, clipped at k) or RoPE."""

    def __init__(self, D, H, c, positional):
        super().__init__()
        self.H, self.Dh, self.c, self.positional = H, D // H, c, positional
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(D, D) for _ in range(4))
        if positional == "relative":
            k = c["relative_clip"]
            self.relative_key = nn.Parameter(torch.randn(2 * k + 1, self.Dh) * 0.5)
            self.relative_value = nn.Parameter(torch.randn(2 * k + 1, self.Dh) * 0.5)
        self.weights = None

    def forward(self, x, mem, key_pad=None, causal=False):
        B, Tq, _ = x.shape
        Tk = mem.shape[1]
        split = lambda t: t.view(B, -1, self.H, self.Dh).transpose(1, 2)  # (B, H, T, Dh)
        q, k, v = split(self.q_proj(x)), split(self.k_proj(mem)), split(self.v_proj(mem))
        if self.positional == "rope":  # queries are the last Tq of the Tk positions
            q = rope_rotate(q, Tk - Tq, self.c["rope_base"], self.c["rope_style"])
            k = rope_rotate(k, 0, self.c["rope_base"], self.c["rope_style"])
        e = q @ k.transpose(-1, -2)
        i = torch.arange(Tq)[:, None] + (Tk - Tq)  # absolute positions of the queries
        j = torch.arange(Tk)[None, :]
        if self.positional == "relative":
            kc = self.c["relative_clip"]
            dist = (j - i).clamp(-kc, kc) + kc  # (Tq, Tk)
            e = e + torch.einsum("bhid,ijd->bhij", q, self.relative_key[dist])  # Shaw eq. (4)
        e = e / math.sqrt(self.Dh)
        mask = torch.zeros(B, 1, Tq, Tk, dtype=torch.bool)
        if causal:
            mask = mask | (j > i)[None, None]
        if key_pad is not None:
            mask = mask | key_pad[:, None, None, :]
        a = torch.softmax(e.masked_fill(mask, float("-inf")), -1)
        self.weights = a.detach()
        z = a @ v
        if self.positional == "relative":
            z = z + torch.einsum("bhij,ijd->bhid", a, self.relative_value[dist])  # Shaw eq. (3)
        return self.out_proj(z.transpose(1, 2).reshape(B, Tq, -1))


class PosLayer(nn.Module):
    """An encoder (cross=False) or decoder layer, post-LN or pre-LN, qkv's module names."""

    def __init__(self, c, cross):
        super().__init__()
        D, self.pre, self.act = c["d_model"], c["pre_norm"], ACTIVATIONS[c["activation"]]
        self.self_attn = PosAttention(D, c["heads"], c, c["positional"])
        self.self_attn_layer_norm = nn.LayerNorm(D)
        if cross:
            self.encoder_attn = PosAttention(D, c["heads"], c, "none")  # no positions across
            self.encoder_attn_layer_norm = nn.LayerNorm(D)
        self.fc1, self.fc2 = nn.Linear(D, c["d_ff"]), nn.Linear(c["d_ff"], D)
        self.final_layer_norm = nn.LayerNorm(D)

    def sub(self, x, ln, f):
        return x + f(ln(x)) if self.pre else ln(x + f(x))

    def forward(self, x, mem, self_pad, mem_pad, causal):
        x = self.sub(x, self.self_attn_layer_norm, lambda y: self.self_attn(y, y, self_pad, causal))
        if hasattr(self, "encoder_attn"):
            x = self.sub(x, self.encoder_attn_layer_norm, lambda y: self.encoder_attn(y, mem, mem_pad))
        act = (lambda t: F.relu(t)) if self.act == "relu" else (lambda t: F.gelu(t)) if self.act == "gelu" else self.act
        return self.sub(x, self.final_layer_norm, lambda y: self.fc2(act(self.fc1(y))))


class PosStack(nn.Module):
    def __init__(self, c, n, cross):
        super().__init__()
        self.layers = nn.ModuleList(PosLayer(c, cross) for _ in range(n))
        if c["pre_norm"]:
            self.layer_norm = nn.LayerNorm(c["d_model"])

    def forward(self, x, mem, self_pad, mem_pad, causal):
        for layer in self.layers:
            x = layer(x, mem, self_pad, mem_pad, causal)
        return self.layer_norm(x) if hasattr(self, "layer_norm") else x


class PosTransformer(nn.Module):
    """Embeddings (* sqrt(d), no absolute positions) + encoder + decoder + generator."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        D = c["d_model"]
        self.src_embed = nn.Embedding(c["src_vocab"], D, padding_idx=c["pad_id"])
        self.tgt_embed = self.src_embed if c["shared_embeddings"] else nn.Embedding(c["tgt_vocab"], D,
                                                                                    padding_idx=c["pad_id"])
        self.encoder = PosStack(c, c["enc_layers"], cross=False)
        self.decoder = PosStack(c, c["dec_layers"], cross=True)
        self.generator = nn.Linear(D, c["tgt_vocab"])
        if c["tie_output"]:
            self.generator.weight = self.tgt_embed.weight

    def embed(self, emb, ids):
        x = emb(ids)
        return x * math.sqrt(self.c["d_model"]) if self.c["scale_embeddings"] else x

    def forward(self, src, src_pad, tgt_in):
        memory = self.encoder(self.embed(self.src_embed, src), None, src_pad, None, False)
        h = self.decoder(self.embed(self.tgt_embed, tgt_in), memory, None, src_pad, True)
        return self.generator(h)

    def cross_weights(self):
        return [layer.encoder_attn.weights for layer in self.decoder.layers]

    def named_qkv(self, get):
        return {n: get(p) for n, p in self.named_parameters()}  # shared / tied: saved once, as qkv


POSITIONAL_MODELS = {
    "post_relative_separate": dict(src_vocab=23, tgt_vocab=19, d_model=16, heads=4, enc_layers=2, dec_layers=2,
                                   d_ff=32, activation="relu", pre_norm=False, shared_embeddings=False,
                                   tie_output=False, positional="relative", relative_clip=2, scale_embeddings=True),
    "pre_rope_shared_tied": dict(src_vocab=21, tgt_vocab=21, d_model=24, heads=3, enc_layers=2, dec_layers=3,
                                 d_ff=48, activation="gelu", pre_norm=True, shared_embeddings=True, tie_output=True,
                                 positional="rope", rope_base=10000.0, rope_style="interleaved",
                                 scale_embeddings=True),
    "post_rope_half_separate": dict(src_vocab=19, tgt_vocab=23, d_model=16, heads=2, enc_layers=1, dec_layers=2,
                                    d_ff=24, activation="silu", pre_norm=False, shared_embeddings=False,
                                    tie_output=False, positional="rope", rope_base=100.0, rope_style="half",
                                    scale_embeddings=True),
    "pre_relative_shared_tied": dict(src_vocab=21, tgt_vocab=21, d_model=16, heads=2, enc_layers=2, dec_layers=2,
                                     d_ff=24, activation="gelu_tanh", pre_norm=True, shared_embeddings=True,
                                     tie_output=True, positional="relative", relative_clip=3,
                                     scale_embeddings=False),
}


def positional_model_cases(r, g):
    """As model_cases, for PosTransformer (relative and rotary positions)."""
    B, S, T = 3, 7, 6
    for name, c in POSITIONAL_MODELS.items():
        c = dict(c, dropout=0.0, attention_dropout=0.0, max_len=16, pad_id=0, bos_id=1, eos_id=2)
        torch.manual_seed(29)
        m = PosTransformer(c)
        randomize(m.encoder, g)
        randomize(m.decoder, g)
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
        tgt_out[2, -2:] = c["pad_id"]
        logits = m(src, src_pad, tgt_in)
        cross = m.cross_weights()
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
    positional_model_cases(r, g)  # after the others: their random draws stay as they were
    r.save(out)
