#!/usr/bin/python3
"""PyTorch math attention forward+backward timing, the counterpart of bench/attention.cpp.

  OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 tools/bench/attention_torch.py [B H Dh]

softmax(Q K^T * scale (+ causal -inf mask)) V written out (torch 1.13 has no fused SDPA), f32,
autograd backward; median ms over the same repetitions as the C++ bench; one line per (mask, T)."""
import os
import sys
import time

import torch


def main():
    B, H, Dh = (int(a) for a in (sys.argv[1:4] if len(sys.argv) >= 4 else (2, 8, 64)))
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    print(f"# torch {torch.__version__} math attention f32, B {B} H {H} Dh {Dh}, threads {torch.get_num_threads()}; median ms")
    print("# cpu = process CPU time (user+sys, all threads) of fwd+bwd")
    print(f"{'mask':<6} {'T':>5} {'fwd_ms':>10} {'fwd+bwd_ms':>12} {'fwd+bwd_cpu_ms':>16}")
    g = torch.Generator().manual_seed(0)
    for causal in (False, True):
        for T in (128, 512, 1024, 2048):
            q, k, v = (torch.randn(B, H, T, Dh, generator=g).requires_grad_(True) for _ in range(3))
            gy = torch.randn(B, H, T, Dh, generator=g)
            cm = torch.ones(T, T, dtype=torch.bool).triu(1) if causal else None
            reps = 10 if T <= 512 else (5 if T <= 1024 else 3)
            fwd, both, cpu = [], [], []
            for r in range(reps + 1):
                for t in (q, k, v):
                    t.grad = None
                c0 = time.process_time()
                t0 = time.perf_counter()
                s = (q @ k.transpose(-1, -2)) * Dh ** -0.5
                if cm is not None:
                    s = s.masked_fill(cm, float("-inf"))
                o = torch.softmax(s, dim=-1) @ v
                t1 = time.perf_counter()
                o.backward(gy)
                t2 = time.perf_counter()
                c2 = time.process_time()
                if r > 0:
                    fwd.append((t1 - t0) * 1e3)
                    both.append((t2 - t0) * 1e3)
                    cpu.append((c2 - c0) * 1e3)
            fwd.sort()
            both.sort()
            cpu.sort()
            print(f"{'causal' if causal else 'none':<6} {T:>5} {fwd[len(fwd) // 2]:>10.2f} {both[len(both) // 2]:>12.2f} {cpu[len(cpu) // 2]:>16.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
