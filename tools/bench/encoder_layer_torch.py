#!/usr/bin/python3
"""torch.nn.TransformerEncoderLayer(norm_first=True) forward+backward timing, the baseline for
bench/encoder_layer.cpp (which runs this script in the same run and prints the ratio).

Run as: OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 tools/bench/encoder_layer_torch.py --threads 2
Prints one line: "torch median_ms=<m> min_ms=<m> iters=<n>".
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
    times = []
    for i in range(a.warmup + a.iters):
        layer.zero_grad(set_to_none=True)
        x.grad = None
        t0 = time.perf_counter()
        y = layer(x)
        y.backward(gy)
        t1 = time.perf_counter()
        if i >= a.warmup:
            times.append((t1 - t0) * 1e3)
    print(f"torch median_ms={statistics.median(times):.3f} min_ms={min(times):.3f} iters={a.iters}")


if __name__ == "__main__":
    main()
