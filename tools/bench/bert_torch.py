#!/usr/bin/python3
"""A BERT-base-shaped encoder in PyTorch, the baseline for bench/bert.cpp (which runs this script in
the same sitting, alternating with qkv, and prints the ratios).

The model is BERT as Hugging Face's BertModel computes it, written here from its layers (Debian
has no transformers): word + position + segment embeddings, LayerNorm, dropout; post-LN layers
  x = LN(x + Dropout(Dense(Attn(x))));  x = LN(x + Dropout(W2 GELU_erf(W1 x)))
with dropout on the attention weights and an additive -inf-like mask on padding keys
(--impl hf). --impl nn builds the layers from torch.nn.TransformerEncoderLayer (post-LN, GELU,
batch_first), whose inference runs torch's fused "fast path" over nested tensors when a padding
mask is given (it also puts a dropout inside the FFN, which BERT has not).

  train   forward + backward of the encoder's last hidden states (B, T, D) against a random
          gradient, random ids, two segments, training mode (dropout 0.1): per-iteration times.
  embed   sentence embeddings of the sentences in --ids (one line of token ids per sentence, as
          qkv tokenized them), sorted by length (the least padding; qkv packs its batches without
          padding instead), right-padded batches of --batch with a padding
          mask, eval mode under torch.no_grad(), mean pooling over the real tokens: sentences/s.

Run as: OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 tools/bench/bert_torch.py train --threads 2
Prints one line: "torch median_ms=<wall> median_cpu_ms=<cpu> min_ms=<wall> peak_rss_mib=<MiB> iters=<n>"
(embed adds sentences_per_s=<n>); cpu = user + system time of the whole process (all threads),
the figure to compare on a shared machine; peak_rss_mib = the process's ru_maxrss.
"""
import argparse
import math
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class BertSelfAttention(nn.Module):
    def __init__(self, d, heads, p):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.dropout = nn.Dropout(p)

    def forward(self, x, mask_add):  # x (B, T, D), mask_add (B, 1, 1, T) or None
        B, T, D = x.shape
        split = lambda t: t.view(B, T, self.h, self.dh).transpose(1, 2)  # (B, H, T, Dh)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh)  # (B, H, T, T)
        if mask_add is not None:
            s = s + mask_add
        a = self.dropout(torch.softmax(s, dim=-1))
        return torch.matmul(a, v).transpose(1, 2).reshape(B, T, D)


class BertLayer(nn.Module):
    def __init__(self, d, heads, ff, p, eps):
        super().__init__()
        self.attn = BertSelfAttention(d, heads, p)
        self.attn_out, self.attn_ln = nn.Linear(d, d), nn.LayerNorm(d, eps=eps)
        self.fc1, self.fc2, self.out_ln = nn.Linear(d, ff), nn.Linear(ff, d), nn.LayerNorm(d, eps=eps)
        self.dropout = nn.Dropout(p)

    def forward(self, x, mask_add):
        x = self.attn_ln(x + self.dropout(self.attn_out(self.attn(x, mask_add))))
        return self.out_ln(x + self.dropout(self.fc2(F.gelu(self.fc1(x)))))


class Bert(nn.Module):
    def __init__(self, a):
        super().__init__()
        d, eps = a.d, 1e-12
        self.word = nn.Embedding(a.vocab, d, padding_idx=0)
        self.pos, self.segment = nn.Embedding(512, d), nn.Embedding(2, d)
        self.ln, self.dropout = nn.LayerNorm(d, eps=eps), nn.Dropout(a.dropout)
        self.impl = a.impl
        if a.impl == "hf":
            self.layers = nn.ModuleList(BertLayer(d, a.heads, a.ff, a.dropout, eps) for _ in range(a.layers))
        else:
            layer = nn.TransformerEncoderLayer(d, a.heads, a.ff, dropout=a.dropout, activation="gelu",
                                               layer_norm_eps=eps, batch_first=True, norm_first=False)
            self.encoder = nn.TransformerEncoder(layer, a.layers)

    def forward(self, ids, types, pad):  # ids, types (B, T) i64; pad (B, T) bool, True = padding, or None
        T = ids.shape[1]
        pos = torch.arange(T, device=ids.device).unsqueeze(0)
        h = self.dropout(self.ln(self.word(ids) + self.pos(pos) + self.segment(types)))  # (B, T, D)
        if self.impl == "nn":
            return self.encoder(h, src_key_padding_mask=pad)
        mask_add = None if pad is None else (pad.float() * torch.finfo(torch.float32).min)[:, None, None, :]
        for layer in self.layers:
            h = layer(h, mask_add)
        return h


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def bench_train(a, model):
    model.train()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, a.vocab, (a.batch, a.len), generator=g)
    types = (torch.arange(a.len) >= a.len // 2).long().expand(a.batch, a.len).contiguous()
    gy = torch.randn(a.batch, a.len, a.d, generator=g)
    times, cpu = [], []
    for i in range(a.warmup + a.iters):
        model.zero_grad(set_to_none=True)
        c0, t0 = time.process_time(), time.perf_counter()
        y = model(ids, types, None)
        y.backward(gy)
        t1, c1 = time.perf_counter(), time.process_time()
        if i >= a.warmup:
            times.append((t1 - t0) * 1e3)
            cpu.append((c1 - c0) * 1e3)
    print(f"torch median_ms={statistics.median(times):.3f} median_cpu_ms={statistics.median(cpu):.3f} "
          f"min_ms={min(times):.3f} peak_rss_mib={peak_rss_mib():.1f} iters={a.iters}")


def embed_batches(ids_path, batch):
    """The sentences of ids_path (token ids, one sentence a line) sorted by length (stable: batches
    of like lengths), right-padded batches of `batch`: a list of (ids, types, pad), pad True at
    padding."""
    rows = [[int(t) for t in line.split()] for line in open(ids_path) if line.strip()]
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    batches = []
    for s in range(0, len(order), batch):
        chunk = [rows[i] for i in order[s:s + batch]]
        T = len(chunk[-1])
        ids = torch.zeros(len(chunk), T, dtype=torch.long)
        pad = torch.ones(len(chunk), T, dtype=torch.bool)
        for r, x in enumerate(chunk):
            ids[r, :len(x)] = torch.tensor(x)
            pad[r, :len(x)] = False
        batches.append((ids, torch.zeros_like(ids), pad))
    return batches


def embed_pass(model, batches, d):
    """One pass over the batches in eval mode under no_grad: the mean of each sentence's real tokens'
    last hidden states, (sentences, d) per batch."""
    out = []
    with torch.no_grad():
        for ids, types, pad in batches:
            h = model(ids, types, pad)  # (B, T, D)
            if h.is_nested:
                h = h.to_padded_tensor(0.0, (ids.shape[0], ids.shape[1], d))
            keep = (~pad).unsqueeze(-1).float()  # (B, T, 1)
            out.append((h * keep).sum(1) / keep.sum(1))  # mean over the real tokens
    return out


def bench_embed(a, model):
    model.eval()
    batches = embed_batches(a.ids, a.batch)
    times, cpu = [], []
    for i in range(a.warmup + a.iters):
        c0, t0 = time.process_time(), time.perf_counter()
        embed_pass(model, batches, a.d)
        t1, c1 = time.perf_counter(), time.process_time()
        if i >= a.warmup:
            times.append((t1 - t0) * 1e3)
            cpu.append((c1 - c0) * 1e3)
    n = sum(b[0].shape[0] for b in batches)
    print(f"torch median_ms={statistics.median(times):.3f} median_cpu_ms={statistics.median(cpu):.3f} "
          f"min_ms={min(times):.3f} peak_rss_mib={peak_rss_mib():.1f} iters={a.iters} "
          f"sentences_per_s={n / (statistics.median(times) / 1e3):.2f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["train", "embed"])
    ap.add_argument("--impl", choices=["hf", "nn"], default="hf")
    ap.add_argument("--vocab", type=int, default=30522)
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--ff", type=int, default=3072)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--len", type=int, default=128)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--ids", help="embed: token ids, one sentence per line")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--int8", action="store_true",
                    help="embed: torch's dynamic int8 quantization of every nn.Linear (quantize_dynamic, qint8 "
                         "weights per tensor, activations per call), on the onednn engine (this build has no fbgemm)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = Bert(a)
    for p in model.parameters():  # Hugging Face's initialisation: N(0, 0.02) matrices, zero biases
        if p.dim() > 1:
            nn.init.normal_(p, std=0.02)
    if a.int8:
        if a.mode != "embed":
            ap.error("--int8 is for embed (inference) only")
        torch.backends.quantized.engine = "onednn"
        model = torch.ao.quantization.quantize_dynamic(model.eval(), {nn.Linear}, dtype=torch.qint8)
    if a.mode == "train":
        bench_train(a, model)
    else:
        bench_embed(a, model)


if __name__ == "__main__":
    main()
