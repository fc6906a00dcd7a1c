#!/usr/bin/python3
"""Training speed, qkv against PyTorch, one step at a time.

The machine these benches run on is shared: back-to-back runs of the GPT reference moved by 3x
within minutes (cfg2: 330 to 1,000 tokens/s), so the ratio of two separate runs says little. Here
both sides live at once and take turns, single steps alternating, the order swapped every pair:
qkv's bench in its paired mode (one step per line on its stdin, answered with the step's wall ms)
and the PyTorch model in this process, built by the same code as the standalone reference:
  gpt cfg1|cfg2  bench_gpt_train CFG W paired  against ../shared/bench-reference/gpt_bench.py's
                 GPT and training step (imported): forward, loss, zero_grad, backward, AdamW;
  bert           bench_bert train-paired  against tools/bench/bert_torch.py's BERT-base (imported):
                 forward and backward of the last hidden states, B 8, T 128, dropout 0.1;
  embed          bench_bert embed-paired  against bert_torch.py's embed pass (--impl hf: BertModel's
                 layers on padded batches; nn: nn.TransformerEncoder's nested-tensor fast path):
                 one "step" is a pass of sentence embeddings over the same --sentences token ids.
A pair's two steps run within a few seconds of each other and see the same machine; the median of
the pairs' ratios is the figure to report.

Run from the repository root, after building the benches:
  OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE \\
    /usr/bin/python3 tools/bench/paired.py gpt cfg1 [--pairs 20] [--warmup 3] [--bf16]
  ... tools/bench/paired.py bert [--pairs 10]
  ... tools/bench/paired.py embed --impl hf|nn [--sentences 256] [--pairs 8] [--bf16]
or, both sides spinning briefly before they sleep (qkv's default wait; see BENCHMARKS.md, Session 4),
  OMP_NUM_THREADS=2 GOMP_SPINCOUNT=5000 /usr/bin/python3 tools/bench/paired.py ...
with OPENBLAS_CORETYPE=SkylakeX added on an AVX-512 CPU only (README, "Threads").
Prints one JSON object: each side's median speed and peak RSS, the median of the pairs' ratios
(qkv's speed over torch's, i.e. torch's step time over qkv's) with quartiles, and every step time.
"""
import argparse
import json
import os
import resource
import statistics
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GPT_SHAPES = {  # the reference README's two training configurations
    "cfg1": dict(vocab=8192, ctx=256, d=256, heads=4, layers=4, dff=1024, batch=16),
    "cfg2": dict(vocab=8192, ctx=128, d=512, heads=8, layers=6, dff=2048, batch=8),
}


def start_qkv(argv):
    """Starts qkv's bench in paired mode and waits for its warm-up. Call it before building the torch
    model: a child's peak RSS (ru_maxrss) counts the pages of the parent it was forked from."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ready = proc.stdout.readline().strip()
    if ready != "ready":
        sys.exit(f"paired.py: {argv[0]} said {ready!r}, expected 'ready'")

    def step():
        proc.stdin.write("step\n")
        proc.stdin.flush()
        return float(proc.stdout.readline())

    def finish():  # the bench's last line is a JSON object with peak_rss_MiB
        proc.stdin.close()
        last = json.loads(proc.stdout.read().strip().splitlines()[-1])
        proc.wait()
        return last["peak_rss_MiB"]

    return step, finish


def gpt_torch_step(a, c):
    sys.path.insert(0, os.path.abspath(a.reference))
    import gpt_bench  # the reference's model
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    model = gpt_bench.GPT(c["vocab"], c["ctx"], c["d"], c["heads"], c["layers"], c["dff"], "mingpt")
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)

    def step():  # gpt_bench.train's loop body, timed the same way
        x = torch.randint(0, c["vocab"], (c["batch"], c["ctx"]))
        y = torch.randint(0, c["vocab"], (c["batch"], c["ctx"]))
        t0 = time.perf_counter()
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=a.bf16):
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, c["vocab"]).float(), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return (time.perf_counter() - t0) * 1e3

    return step


def bert_torch_model(impl, dropout):
    """tools/bench/bert_torch.py's BERT-base, initialised as its main does: N(0, 0.02) matrices."""
    sys.path.insert(0, HERE)
    import bert_torch
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    model = bert_torch.Bert(argparse.Namespace(vocab=30522, d=768, heads=12, ff=3072, layers=12,
                                               dropout=dropout, impl=impl))
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.normal_(p, std=0.02)
    return model


def bert_torch_step(a):
    import torch

    model = bert_torch_model("hf", a.dropout)
    model.train()
    B, T = 8, 128
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 30522, (B, T), generator=g)
    types = (torch.arange(T) >= T // 2).long().expand(B, T).contiguous()
    gy = torch.randn(B, T, 768, generator=g)

    def step():  # bert_torch.bench_train's iteration
        model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        y = model(ids, types, None)
        y.backward(gy)
        return (time.perf_counter() - t0) * 1e3

    return step


def embed_torch_pass(a, ids_path):
    import warnings

    warnings.filterwarnings("ignore", message=".*nested tensors is in prototype.*")  # nn's fast path, every pass
    model = bert_torch_model(a.impl, 0.1).eval()
    import bert_torch  # on the path: bert_torch_model put it there
    import torch
    batches = bert_torch.embed_batches(ids_path, 32)

    def step():  # bert_torch.bench_embed's pass (under autocast with --bf16)
        t0 = time.perf_counter()
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=a.bf16):
            bert_torch.embed_pass(model, batches, 768)
        return (time.perf_counter() - t0) * 1e3

    return step


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model", choices=["gpt", "bert", "embed"])
    p.add_argument("cfg", nargs="?", choices=sorted(GPT_SHAPES), help="gpt: the configuration")
    p.add_argument("--pairs", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3, help="gpt: warm-up steps per side (bert, embed: one)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--bf16", action="store_true", help="gpt, embed: qkv's bf16 products against torch's autocast")
    p.add_argument("--dropout", type=float, default=0.1, help="bert")
    p.add_argument("--impl", choices=["hf", "nn"], default="hf", help="embed: torch's model (bert_torch.py --impl)")
    p.add_argument("--sentences", type=int, default=256, help="embed: sentences in a pass")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--reference", default=os.path.join(ROOT, "..", "shared", "bench-reference"))
    a = p.parse_args()
    if a.model == "gpt" and not a.cfg:
        p.error("gpt needs cfg1 or cfg2")
    if a.model == "bert" and a.bf16:
        p.error("bert: the training step is measured in fp32 only")
    if a.model == "embed" and a.bf16 and a.impl == "nn":  # torch 1.13's _transformer_encoder_layer_fwd
        p.error("embed --bf16: torch's nn fast path fails under CPU autocast (\"expected scalar type BFloat16 "
                "but found Float\"); use --impl hf")
    # Both sides share this environment. A side waiting for its turn must not spin for long:
    # PASSIVE (the reference README's setting for torch), or no wait policy and a bounded
    # GOMP_SPINCOUNT (qkv's own default: 5000, ~75 us here; at most 20000).
    policy, spin = os.environ.get("OMP_WAIT_POLICY", "").upper(), os.environ.get("GOMP_SPINCOUNT", "")
    bounded_spin = policy == "" and spin.isdigit() and int(spin) <= 20000
    if policy != "PASSIVE" and not bounded_spin:
        sys.exit("paired.py: run with OMP_WAIT_POLICY=PASSIVE, or without OMP_WAIT_POLICY and with "
                 "GOMP_SPINCOUNT <= 20000 (a side waiting for its turn must not spin for long)")
    if a.model == "gpt":
        c = GPT_SHAPES[a.cfg]
        qkv_step, qkv_finish = start_qkv([os.path.join(a.build, "bench", "bench_gpt_train"), a.cfg, str(a.warmup),
                                          "paired", "bf16" if a.bf16 else "fp32"])
        torch_step = gpt_torch_step(a, c)
        unit, per_step = "tokens_per_s", c["batch"] * c["ctx"]
    elif a.model == "bert":
        qkv_step, qkv_finish = start_qkv([os.path.join(a.build, "bench", "bench_bert"), "train-paired",
                                          str(a.dropout)])
        torch_step = bert_torch_step(a)
        unit, per_step = "iters_per_s", 1
    else:  # qkv writes the token ids of its sentences; torch embeds the same ids
        ids_path = os.path.join(tempfile.mkdtemp(prefix="qkv_paired_"), "ids.txt")
        qkv_step, qkv_finish = start_qkv([os.path.join(a.build, "bench", "bench_bert"), "embed-paired",
                                          str(a.sentences), ids_path, "bf16" if a.bf16 else "fp32"])
        torch_step = embed_torch_pass(a, ids_path)
        shutil.rmtree(os.path.dirname(ids_path))
        unit, per_step = "sentences_per_s", a.sentences
    import torch
    torch.set_num_threads(a.threads)
    for _ in range(a.warmup if a.model == "gpt" else 1):
        torch_step()

    q_ms, t_ms = [], []
    for i in range(a.pairs):
        if i % 2 == 0:
            q_ms.append(qkv_step())
            t_ms.append(torch_step())
        else:
            t_ms.append(torch_step())
            q_ms.append(qkv_step())
    qkv_rss = qkv_finish()

    ratios = sorted(t / q for q, t in zip(q_ms, t_ms))  # qkv's speed over torch's, per pair
    quart = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [ratios[0]] * 3
    speed = lambda ms: round(per_step / statistics.median(ms) * 1e3, 2)
    print(json.dumps({
        "bench": "paired", "model": a.model,
        "cfg": f"{a.sentences} sentences, torch {a.impl}" if a.model == "embed" else a.cfg,
        "precision": "bf16" if a.bf16 else "fp32",
        "threads": a.threads, "pairs": a.pairs, "wait": "PASSIVE" if policy == "PASSIVE" else "GOMP_SPINCOUNT=" + spin,
        "qkv_" + unit + "_median": speed(q_ms), "torch_" + unit + "_median": speed(t_ms),
        "ratio_median": round(statistics.median(ratios), 3), "ratio_q1": round(quart[0], 3),
        "ratio_q3": round(quart[2], 3), "ratio_min": round(ratios[0], 3), "ratio_max": round(ratios[-1], 3),
        "qkv_peak_rss_MiB": qkv_rss,
        "torch_peak_rss_MiB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "qkv_step_ms": [round(v, 1) for v in q_ms], "torch_step_ms": [round(v, 1) for v in t_ms]}))


if __name__ == "__main__":
    main()
