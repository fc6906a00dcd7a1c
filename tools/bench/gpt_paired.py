#!/usr/bin/python3
"""GPT training speed, qkv against the shared PyTorch reference, one step at a time.

The machine these benches run on is shared: back-to-back runs of the reference have moved by 3x
within minutes (cfg2: 330 to 1,000 tokens/s), so a ratio of two separate runs says little. Here
both sides live at once and take turns: qkv's bench_gpt_train in its "paired" mode (one step per
line on its stdin) and the reference's own model and training step (gpt_bench.py from
../shared/bench-reference, imported, so the model is the same code), alternating single steps,
the order swapped every pair. Each pair's steps ran within about two seconds of each other, so a
pair's ratio sees the same machine; the median over the pairs is the figure to report.

Run (from the repository root, after building the benches):
  OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE OPENBLAS_CORETYPE=SkylakeX \\
    /usr/bin/python3 tools/bench/gpt_paired.py cfg1 [--pairs 20] [--warmup 3] [--bf16]
Prints one JSON object: each side's median tokens/s and peak RSS, the median of the pairs'
ratios (qkv tokens/s over the reference's) with its quartiles, and every step's time.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHAPES = {  # the reference README's two training configurations
    "cfg1": dict(vocab=8192, ctx=256, d=256, heads=4, layers=4, dff=1024, batch=16),
    "cfg2": dict(vocab=8192, ctx=128, d=512, heads=8, layers=6, dff=2048, batch=8),
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("cfg", choices=sorted(SHAPES))
    p.add_argument("--pairs", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--bf16", action="store_true", help="qkv bf16 products against the reference's autocast")
    p.add_argument("--qkv", default=os.path.join(ROOT, "build", "bench", "bench_gpt_train"))
    p.add_argument("--reference", default=os.path.join(ROOT, "..", "shared", "bench-reference"))
    a = p.parse_args()
    if os.environ.get("OMP_WAIT_POLICY", "").upper() != "PASSIVE":
        sys.exit("gpt_paired.py: run with OMP_WAIT_POLICY=PASSIVE (the reference's best setting; a side "
                 "waiting for its turn must not spin)")
    # qkv first, while this process is small: a child's peak RSS (ru_maxrss) counts the parent's
    # pages it was forked with, so forking after torch's model is built would report torch's too.
    qkv = subprocess.Popen([a.qkv, a.cfg, str(a.warmup), "paired", "bf16" if a.bf16 else "fp32"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ready = qkv.stdout.readline().strip()  # after qkv's warm-up steps
    if ready != "ready":
        sys.exit(f"gpt_paired.py: {a.qkv} said {ready!r}, expected 'ready'")

    sys.path.insert(0, os.path.abspath(a.reference))
    import gpt_bench  # the reference's model
    import torch
    import torch.nn.functional as F

    c = SHAPES[a.cfg]
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = gpt_bench.GPT(c["vocab"], c["ctx"], c["d"], c["heads"], c["layers"], c["dff"], "mingpt")
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)

    def torch_step():  # gpt_bench.train's loop body, timed the same way
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

    for _ in range(a.warmup):
        torch_step()

    def qkv_step():
        qkv.stdin.write("step\n")
        qkv.stdin.flush()
        return float(qkv.stdout.readline())

    tokens = c["batch"] * c["ctx"]
    q_ms, t_ms = [], []
    for i in range(a.pairs):
        if i % 2 == 0:
            q_ms.append(qkv_step())
            t_ms.append(torch_step())
        else:
            t_ms.append(torch_step())
            q_ms.append(qkv_step())
    qkv.stdin.close()
    summary = json.loads(qkv.stdout.read().strip().splitlines()[-1])
    qkv.wait()

    ratios = sorted(t / q for q, t in zip(q_ms, t_ms))  # qkv tokens/s over torch's, per pair
    quart = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [ratios[0]] * 3
    print(json.dumps(dict(
        bench="gpt_paired", cfg=a.cfg, precision="bf16" if a.bf16 else "fp32", threads=a.threads, pairs=a.pairs,
        qkv_tokens_per_s_median=round(tokens / statistics.median(q_ms) * 1e3, 1),
        torch_tokens_per_s_median=round(tokens / statistics.median(t_ms) * 1e3, 1),
        ratio_median=round(statistics.median(ratios), 3), ratio_q1=round(quart[0], 3), ratio_q3=round(quart[2], 3),
        ratio_min=round(ratios[0], 3), ratio_max=round(ratios[-1], 3),
        qkv_peak_rss_MiB=summary["peak_rss_MiB"],
        torch_peak_rss_MiB=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        qkv_step_ms=[round(v, 1) for v in q_ms], torch_step_ms=[round(v, 1) for v in t_ms])))


if __name__ == "__main__":
    main()
