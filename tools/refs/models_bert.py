"""References for models/bert, the Hugging Face BERT layout (io/bert) and sentence embeddings
(tasks/embedder).

A BERT written here in plain PyTorch from the paper (Devlin et al. 2019) and the layout of the
published checkpoints (Hugging Face's BertForPreTraining state dict), computed in float64 from
float32 weights:
  x = LN(E_word[ids] + E_pos[0..T-1] + E_type[types])                      bert.embeddings.*
  per layer (post-LN):  x = LN(x + Wo Attn(Wq x, Wk x, Wv x))               attention.self.{query,key,value},
                        x = LN(x + W2 act(W1 x))                            attention.output.{dense,LayerNorm},
                                                                            intermediate.dense, output.{dense,LayerNorm}
  attention: softmax(q k^T / sqrt(Dh) + mask) with mask = finfo.min on padding keys (Hugging
  Face's extended attention mask), bidirectional;
  pooled = tanh(W_p x[:, 0] + b_p)                                          bert.pooler.dense
  MLM    = LN(act(W_t x + b_t)) E_word^T + b                                cls.predictions.{transform.*, bias}
  NSP    = W_s pooled + b_s                                                 cls.seq_relationship
The word embedding is an nn.Embedding with padding_idx = pad_token_id (no gradient through the
lookup of that row; the tied MLM decoder still gives it one).

Cases (each writes <out dir>/models_bert/<case>/ with config.json + model.safetensors, random
weights, and a vocab.txt):
  "pretraining": BertForPreTraining's layout ("bert." prefix, both heads, the position_ids
      buffer, the tied cls.predictions.decoder.weight stored too); a batch of three rows with
      right padding and two segments: hidden (B, T, D), pooled (B, D), mlm_logits (B, T, V),
      nsp_logits (B, 2), loss = MLM cross-entropy over the labelled positions + NSP
      cross-entropy, and its gradient for every parameter by published name.
  "bare_encoder": BertModel's layout (no prefix, TF-era LayerNorm gamma/beta, no pooler, no
      heads, an extra classifier.* head), gelu_new: hidden states of the same batch.
  "embed_single", "embed_pairs", "embed_truncated": sentence embeddings of the "pretraining"
      model for texts and pairs written with its vocab.txt's words: [CLS] a [SEP] (b [SEP]),
      right-padded, inputs longer than the 16 positions cut longest-first (a tie cuts b; the
      last input of embed_truncated is a single text, "pairs" holds null for it); cls = the last
      hidden state at [CLS], mean = the average over the non-padding tokens, and mean
      L2-normalised.
"""
import json
import math
import os

import torch
import torch.nn.functional as F
from qkvref import Refs, save_safetensors

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = [f"w{i}" for i in range(40)]
VOCAB = SPECIALS + WORDS  # 45 ids
PAD, CLS, SEP = 0, 2, 3
BASE = {"architectures": ["BertForPreTraining"], "model_type": "bert", "vocab_size": 47, "hidden_size": 32,
        "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 40, "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 16,
        "type_vocab_size": 2, "layer_norm_eps": 1e-12, "pad_token_id": PAD, "position_embedding_type": "absolute",
        "initializer_range": 0.02, "use_cache": True, "transformers_version": "4.30.0"}


def init_params(cfg, gen, heads=True, pooler=True):
    V, P, D, F_, L = (cfg["vocab_size"], cfg["max_position_embeddings"], cfg["hidden_size"],
                      cfg["intermediate_size"], cfg["num_hidden_layers"])

    def rnd(*shape, std=0.3):
        return torch.randn(*shape, generator=gen) * std

    def ln(name):
        return {name + ".weight": 1 + rnd(D, std=0.1), name + ".bias": rnd(D, std=0.1)}

    def lin(name, n_out, n_in):
        return {name + ".weight": rnd(n_out, n_in, std=n_in ** -0.5), name + ".bias": rnd(n_out, std=0.1)}

    e = "bert.embeddings."
    p = {e + "word_embeddings.weight": rnd(V, D), e + "position_embeddings.weight": rnd(P, D, std=0.1),
         e + "token_type_embeddings.weight": rnd(cfg["type_vocab_size"], D, std=0.1)}
    p.update(ln(e + "LayerNorm"))
    for i in range(L):
        h = f"bert.encoder.layer.{i}."
        for n in ("query", "key", "value"):
            p.update(lin(h + "attention.self." + n, D, D))
        p.update(lin(h + "attention.output.dense", D, D))
        p.update(ln(h + "attention.output.LayerNorm"))
        p.update(lin(h + "intermediate.dense", F_, D))
        p.update(lin(h + "output.dense", D, F_))
        p.update(ln(h + "output.LayerNorm"))
    if pooler:
        p.update(lin("bert.pooler.dense", D, D))
    if heads:
        p.update(lin("cls.predictions.transform.dense", D, D))
        p.update(ln("cls.predictions.transform.LayerNorm"))
        p["cls.predictions.bias"] = rnd(V, std=0.1)
        p.update(lin("cls.seq_relationship", 2, D))
    return {k: v.requires_grad_(True) for k, v in p.items()}


def act(cfg, x):
    return {"gelu": F.gelu, "gelu_new": lambda t: F.gelu(t, approximate="tanh"), "relu": F.relu,
            "silu": F.silu}[cfg["hidden_act"]](x)


def bert_forward(cfg, p, ids, types, real):
    """p: published name -> tensor (float64 for the computation); real (B, T): 1 = token, 0 = padding.
    Returns hidden (B, T, D), pooled (B, D) or None, mlm (B, T, V) or None, nsp (B, 2) or None."""
    B, T = ids.shape
    D, H, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    Dh = D // H
    ln = lambda x, n: F.layer_norm(x, (D,), p[n + ".weight"], p[n + ".bias"], eps)
    lin = lambda x, n: F.linear(x, p[n + ".weight"], p[n + ".bias"])
    e = "bert.embeddings."
    x = (F.embedding(ids, p[e + "word_embeddings.weight"], padding_idx=cfg["pad_token_id"]) +
         p[e + "position_embeddings.weight"][torch.arange(T)] + p[e + "token_type_embeddings.weight"][types])
    x = ln(x, e + "LayerNorm")
    mask = (1.0 - real[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min  # (B, 1, 1, T)
    for i in range(cfg["num_hidden_layers"]):
        h = f"bert.encoder.layer.{i}."
        q, k, v = (lin(x, h + "attention.self." + n).view(B, T, H, Dh).transpose(1, 2) for n in ("query", "key", "value"))
        w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(Dh) + mask, dim=-1)  # (B, H, T, T)
        z = (w @ v).transpose(1, 2).reshape(B, T, D)
        x = ln(lin(z, h + "attention.output.dense") + x, h + "attention.output.LayerNorm")
        x = ln(lin(act(cfg, lin(x, h + "intermediate.dense")), h + "output.dense") + x, h + "output.LayerNorm")
    pooled = torch.tanh(lin(x[:, 0], "bert.pooler.dense")) if "bert.pooler.dense.weight" in p else None
    mlm = nsp = None
    if "cls.predictions.bias" in p:
        t = ln(act(cfg, lin(x, "cls.predictions.transform.dense")), "cls.predictions.transform.LayerNorm")
        mlm = t @ p[e + "word_embeddings.weight"].t() + p["cls.predictions.bias"]
        nsp = lin(pooled, "cls.seq_relationship")
    return x, pooled, mlm, nsp


def batch(gen):
    """Three rows [CLS] a [SEP] b [SEP] (the last a single segment), right-padded to T = 13."""
    lens = [(5, 6), (3, 2), (7, 0)]
    T = max(1 + a + 1 + (b + 1 if b else 0) for a, b in lens)
    ids = torch.full((3, T), PAD)
    types = torch.zeros(3, T, dtype=torch.long)
    real = torch.zeros(3, T, dtype=torch.uint8)
    for r, (a, b) in enumerate(lens):
        wa = torch.randint(len(SPECIALS), len(VOCAB), (a,), generator=gen).tolist()
        wb = torch.randint(len(SPECIALS), len(VOCAB), (b,), generator=gen).tolist()
        row = [CLS] + wa + [SEP] + (wb + [SEP] if b else [])
        ids[r, :len(row)] = torch.tensor(row)
        types[r, a + 2:len(row)] = 1
        real[r, :len(row)] = 1
    return ids, types, real


def write_dir(d, cfg, tensors):
    os.makedirs(d, exist_ok=True)
    save_safetensors(os.path.join(d, "model.safetensors"), tensors, {"format": "pt"})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(d, "vocab.txt"), "w") as f:
        f.write("".join(t + "\n" for t in VOCAB))


def f64(p):
    return {k: v.double() for k, v in p.items()}


def main(out):
    refs = Refs()
    root = os.path.join(os.path.dirname(out), "models_bert")

    # ---- pretraining: BertForPreTraining layout, both heads, loss gradients
    cfg = dict(BASE)
    gen = torch.Generator().manual_seed(1810)
    p = init_params(cfg, gen)
    ids, types, real = batch(gen)
    labels = torch.full(ids.shape, -100)
    for r, c in ((0, 2), (0, 9), (1, 1), (1, 5), (2, 4), (2, 8)):  # masked positions and their targets
        labels[r, c] = int(torch.randint(len(SPECIALS), len(VOCAB), (1,), generator=gen))
    nsp_labels = torch.tensor([0, 1, 0])
    hidden, pooled, mlm, nsp = bert_forward(cfg, f64(p), ids, types, real)
    loss = (F.cross_entropy(mlm.reshape(-1, cfg["vocab_size"]), labels.reshape(-1), ignore_index=-100) +
            F.cross_entropy(nsp, nsp_labels))
    names = sorted(p)
    gs = torch.autograd.grad(loss, [p[n] for n in names])
    stored = {k: v.detach() for k, v in p.items()}
    stored["bert.embeddings.position_ids"] = torch.arange(cfg["max_position_embeddings"])[None]
    stored["cls.predictions.decoder.weight"] = stored["bert.embeddings.word_embeddings.weight"]
    write_dir(os.path.join(root, "pretraining"), cfg, stored)
    t = {"ids": ids, "token_type_ids": types, "key_pad": 1 - real, "mlm_labels": labels, "nsp_labels": nsp_labels,
         "hidden": hidden.float(), "pooled": pooled.float(), "mlm_logits": mlm.float(), "nsp_logits": nsp.float(),
         "loss": loss.float()}
    t.update({"grad." + n: g.float() for n, g in zip(names, gs)})
    refs.case("pretraining", {"dir": "models_bert/pretraining"}, **t)

    # ---- bare encoder: BertModel layout, gamma/beta, no pooler, an unrelated head
    cfg2 = dict(BASE, hidden_act="gelu_new", architectures=["BertModel"])
    gen = torch.Generator().manual_seed(2019)
    p2 = {k: v.detach() for k, v in init_params(cfg2, gen, heads=False, pooler=False).items()}
    hidden2, _, _, _ = bert_forward(cfg2, f64(p2), ids, types, real)
    stored = {}
    for k, v in p2.items():
        k = k[len("bert."):]
        if "LayerNorm." in k:
            k = k.replace(".weight", ".gamma").replace(".bias", ".beta")
        stored[k] = v
    stored["classifier.weight"] = torch.randn(3, cfg2["hidden_size"], generator=gen)
    stored["classifier.bias"] = torch.zeros(3)
    write_dir(os.path.join(root, "bare_encoder"), cfg2, stored)
    refs.case("bare_encoder", {"dir": "models_bert/bare_encoder"}, ids=ids, token_type_ids=types, key_pad=1 - real,
              hidden=hidden2.float())

    # ---- sentence embeddings of the pretraining model
    gen = torch.Generator().manual_seed(7)
    P = f64({k: v.detach() for k, v in p.items()})

    def text(n):
        return " ".join(WORDS[int(i)] for i in torch.randint(0, len(WORDS), (n,), generator=gen))

    singles = [text(n) for n in (4, 1, 9, 2, 6)]
    pairs = [(text(a), text(b)) for a, b in ((3, 5), (1, 1), (6, 2))]
    # longer than the 16 positions: cut to 16 tokens, the longer text first (a tie cuts b)
    long_pairs = [(text(a), text(b)) for a, b in ((12, 9), (2, 20), (8, 8), (30, 0))]
    long_pairs[-1] = (long_pairs[-1][0], None)
    P_max = cfg["max_position_embeddings"]
    for name, inputs in (("embed_single", [(s, None) for s in singles]), ("embed_pairs", pairs),
                         ("embed_truncated", long_pairs)):
        rows = []
        for a, b in inputs:
            ta = [VOCAB.index(w) for w in a.split()]
            tb = [VOCAB.index(w) for w in b.split()] if b is not None else []
            budget = P_max - (3 if b is not None else 2)
            while len(ta) + len(tb) > budget:  # transformers' truncation="longest_first"
                if len(ta) > len(tb):
                    ta = ta[:-1]
                else:
                    tb = tb[:-1]
            row, ty = [CLS] + ta + [SEP], [0] * (len(ta) + 2)
            if b is not None:
                row, ty = row + tb + [SEP], ty + [1] * (len(tb) + 1)
            rows.append((row, ty))
        T = max(len(r) for r, _ in rows)
        ids_e = torch.full((len(rows), T), PAD)
        types_e = torch.zeros(len(rows), T, dtype=torch.long)
        real_e = torch.zeros(len(rows), T, dtype=torch.uint8)
        for r, (row, ty) in enumerate(rows):
            ids_e[r, :len(row)], types_e[r, :len(row)], real_e[r, :len(row)] = torch.tensor(row), torch.tensor(ty), 1
        with torch.no_grad():
            h, _, _, _ = bert_forward(cfg, P, ids_e, types_e, real_e)
            m = real_e[:, :, None].double()
            mean = (h * m).sum(1) / m.sum(1)
        refs.case(name, {"dir": "models_bert/pretraining", "texts": [a for a, _ in inputs],
                         "pairs": [b for _, b in inputs] if inputs[0][1] is not None else None},
                  cls=h[:, 0].float(), mean=mean.float(), mean_normalized=F.normalize(mean, dim=1).float())
    refs.save(out)
