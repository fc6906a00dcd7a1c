#!/usr/bin/python3
"""torch.nn.TransformerEncoderLayer(norm_first=True) forward+backward timing, the baseline for
bench/encoder_layer.cpp (which runs this script in the same run and prints the ratio).

Run as: OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 tools/bench/encoder_layer_torch.py --threads 2
Prints one line: "torch median_ms=<wall> median_cpu_ms=<cpu> min_ms=<wall> iters=<n>"; cpu = user + system
time of the whole process (all threads), the figure to compare on a shared machine.
"""
import argparse
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--ff", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--len", type=int, default=128)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(a.d, a.heads, a.ff, dropout=a.dropout, activation="relu",
                                             batch_first=True, norm_first=True)
    layer.train()
    x = torch.randn(a.batch, a.len, a.d, requires_grad=True)
    gy = torch.randn(a.batch, a.len, a.d)
    times, cpu = [], []
    for i in range(a.warmup + a.iters):
        layer.zero_grad(set_to_none=True)
        x.grad = None
        c0, t0 = time.process_time(), time.perf_counter()
        y = layer(x)
        y.backward(gy)
        t1, c1 = time.perf_counter(), time.process_time()
        if i >= a.warmup:
            times.append((t1 - t0) * 1e3)
            cpu.append((c1 - c0) * 1e3)
    print(f"torch median_ms={statistics.median(times):.3f} median_cpu_ms={statistics.median(cpu):.3f} "
          f"min_ms={min(times):.3f} iters={a.iters}")


if __name__ == "__main__":
    main()
