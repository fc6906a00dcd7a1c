#!/usr/bin/python3
"""torch.nn.LSTM / torch.nn.GRU forward+backward timing, the baseline for bench/lstm.cpp (which runs
this script in the same run and prints the ratio). One layer, batch-first, training mode; the
backward is output.backward(g) with x requiring grad, as on the qkv side.

Run as: OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 tools/bench/lstm_torch.py --cell lstm --threads 2
Prints one line: "torch median_ms=<wall> median_cpu_ms=<cpu> min_ms=<wall> iters=<n>"; cpu = user +
system time of the whole process (all threads), the figure to compare on a shared machine.
"""
import argparse
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cell", choices=["lstm", "gru"], default="lstm")
    ap.add_argument("--input", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--len", type=int, default=32)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    rnn = (torch.nn.LSTM if a.cell == "lstm" else torch.nn.GRU)(a.input, a.hidden, batch_first=True)
    rnn.train()
    x = torch.randn(a.batch, a.len, a.input, requires_grad=True)
    gy = torch.randn(a.batch, a.len, a.hidden)
    times, cpu = [], []
    for i in range(a.warmup + a.iters):
        rnn.zero_grad(set_to_none=True)
        x.grad = None
        c0, t0 = time.process_time(), time.perf_counter()
        y, _ = rnn(x)
        y.backward(gy)
        t1, c1 = time.perf_counter(), time.process_time()
        if i >= a.warmup:
            times.append((t1 - t0) * 1e3)
            cpu.append((c1 - c0) * 1e3)
    print(f"torch median_ms={statistics.median(times):.3f} median_cpu_ms={statistics.median(cpu):.3f} "
          f"min_ms={min(times):.3f} iters={a.iters}")


if __name__ == "__main__":
    main()
