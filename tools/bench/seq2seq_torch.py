#!/usr/bin/python3
"""seq2seq_torch.py - PyTorch CPU baseline for an encoder-decoder Transformer (torch.nn.Transformer).

Model: shared src/tgt token embedding (vocab 8000) * sqrt(d) + sinusoidal positions,
torch.nn.Transformer(d_model 256, nhead 4, 3 enc + 3 dec layers, dim_feedforward 1024,
dropout --dropout (default 0.1, the nn.Transformer default), ReLU, post-LN = defaults,
batch_first=True), separate output Linear(256, 8000). fp32, AdamW, random token data.

train : batch 64, src len 32, tgt len 32 (decoder input = BOS + 31 tokens, 32 targets);
        reports target tokens/s (median over timed steps after warm-up).
decode: greedy decoding, batch 32, src len 32, max length 32 (always 32 steps, no EOS stop;
        the decoder is re-run over the whole prefix every step - nn.Transformer has no cache);
        reports sentences/s. --beam K > 1: beam search instead (K rows per sentence, log-softmax
        scores, top-K of the K*V extensions per sentence, rows reordered every step; same 32
        steps, no EOS stop).
  /usr/bin/python3 seq2seq_torch.py train
  /usr/bin/python3 seq2seq_torch.py decode [--beam 4]

The shared copy of this script (/work/shared/bench-reference/seq2seq_bench.py) is the baseline
figure source; this one adds process CPU time (cpu_s_median: user + system of all threads per
repetition, the figure to compare on a shared machine) and --beam. bench/seq2seq_decode.cpp runs
it as a child process.
"""
import argparse
import json
import math
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Seq2Seq(nn.Module):
    def __init__(self, vocab, d, heads, n_enc, n_dec, dff, dropout, maxlen=512):
        super().__init__()
        self.d = d
        self.emb = nn.Embedding(vocab, d)
        pe = torch.zeros(maxlen, d)
        pos = torch.arange(maxlen).unsqueeze(1)
        div = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer("pe", pe)
        self.tf = nn.Transformer(d, heads, n_enc, n_dec, dff, dropout, batch_first=True)
        self.out = nn.Linear(d, vocab)

    def embed(self, x):
        return self.emb(x) * math.sqrt(self.d) + self.pe[: x.shape[1]]

    def encode(self, src):
        return self.tf.encoder(self.embed(src))

    def decode(self, tgt, memory):
        T = tgt.shape[1]
        mask = self.tf.generate_square_subsequent_mask(T)
        return self.out(self.tf.decoder(self.embed(tgt), memory, tgt_mask=mask))

    def forward(self, src, tgt):
        return self.decode(tgt, self.encode(src))


def build(a):
    torch.manual_seed(0)
    return Seq2Seq(a.vocab, a.d, a.heads, a.enc, a.dec, a.dff, a.dropout)


def train(a):
    model = build(a).train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    times, cpu = [], []
    for step in range(a.warmup + a.steps):
        src = torch.randint(3, a.vocab, (a.batch, a.src_len))
        tgt = torch.randint(3, a.vocab, (a.batch, a.tgt_len))
        tgt_in = torch.cat([torch.ones(a.batch, 1, dtype=torch.long), tgt[:, :-1]], 1)  # BOS=1
        c0, t0 = time.process_time(), time.perf_counter()
        logits = model(src, tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, a.vocab), tgt.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        if step >= a.warmup:
            times.append(dt)
            cpu.append(dc)
    tok = a.batch * a.tgt_len
    tps = [tok / t for t in times]
    n_params = sum(p.numel() for p in model.parameters())
    print(json.dumps(dict(mode="train", dropout=a.dropout, batch=a.batch, src_len=a.src_len,
                          tgt_len=a.tgt_len, threads=torch.get_num_threads(), n_params=n_params,
                          target_tokens_per_step=tok, step_time_s_median=statistics.median(times), cpu_s_median=statistics.median(cpu),
                          tgt_tokens_per_s_median=statistics.median(tps), min=min(tps), max=max(tps),
                          src_plus_tgt_tokens_per_s_median=statistics.median(tps) * (a.src_len + a.tgt_len) / a.tgt_len,
                          peak_rss_MiB=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024), indent=1))


@torch.no_grad()
def greedy(model, src, max_len):
    memory = model.encode(src)
    ys = torch.ones(src.shape[0], 1, dtype=torch.long)  # BOS
    for _ in range(max_len):
        logits = model.decode(ys, memory)
        ys = torch.cat([ys, logits[:, -1].argmax(-1, keepdim=True)], 1)
    return ys


@torch.no_grad()
def beam_search(model, src, max_len, K):
    B = src.shape[0]
    memory = model.encode(src).repeat_interleave(K, 0)  # (B*K, S, D)
    ys = torch.ones(B * K, 1, dtype=torch.long)  # BOS
    score = torch.full((B, K), float("-inf"))
    score[:, 0] = 0  # only beam 0 alive at first
    for _ in range(max_len):
        logits = model.decode(ys, memory)[:, -1]  # (B*K, V)
        V = logits.shape[-1]
        cand = (score.unsqueeze(-1) + F.log_softmax(logits, -1).view(B, K, V)).view(B, K * V)
        score, idx = cand.topk(K, -1)  # (B, K)
        rows = (torch.arange(B).unsqueeze(1) * K + idx // V).view(-1)
        ys = torch.cat([ys.index_select(0, rows), (idx % V).view(-1, 1)], 1)
    return ys.view(B, K, -1)[:, 0]


def decode(a):
    model = build(a).eval()
    src = torch.randint(3, a.vocab, (a.dbatch, a.src_len))
    run = (lambda n: greedy(model, src, n)) if a.beam == 1 else (lambda n: beam_search(model, src, n, a.beam))
    run(4)  # warm-up
    ts, cpu = [], []
    for _ in range(a.reps):
        c0, t0 = time.process_time(), time.perf_counter()
        run(a.max_len)
        ts.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    sps = [a.dbatch / t for t in ts]
    print(json.dumps(dict(mode="decode", beam=a.beam, batch=a.dbatch, src_len=a.src_len, max_len=a.max_len,
                          threads=torch.get_num_threads(), sentences_per_s_median=statistics.median(sps),
                          wall_s_median=statistics.median(ts), cpu_s_median=statistics.median(cpu),
                          min=min(sps), max=max(sps), reps=a.reps,
                          generated_tokens_per_s_median=statistics.median(sps) * a.max_len,
                          peak_rss_MiB=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024), indent=1))


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["train", "decode"])
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--d", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--enc", type=int, default=3)
    p.add_argument("--dec", type=int, default=3)
    p.add_argument("--dff", type=int, default=1024)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--src_len", type=int, default=32)
    p.add_argument("--tgt_len", type=int, default=32)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--dbatch", type=int, default=32)
    p.add_argument("--max_len", type=int, default=32)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--beam", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    (train if a.mode == "train" else decode)(a)
