#!/usr/bin/python3
"""seq2seq_ddp_torch.py - PyTorch's data-parallel counterpart of bench/mpi_train.cpp: the shared
baseline's model (../shared/bench-reference/seq2seq_bench.py, imported: d 256, 4 heads, 3+3
post-LN, d_ff 1024, vocab 8000, dropout 0.1, AdamW lr 3e-4 wd 0.01) trained with
DistributedDataParallel over the gloo backend on N processes of T threads, global batch 64 x 32
random tokens (each rank its 64 / N rows; DDP averages the ranks' mean losses' gradients, which is
the whole batch's mean for equal shards), 3 warm-up + S timed steps. Rank 0 prints the global
target tokens/s (median) as JSON.
  /usr/bin/python3 seq2seq_ddp_torch.py [--ranks 2] [--threads 1] [--steps 20]
"""
import argparse
import importlib.util
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REF_DIR = os.environ.get("QKV_BENCH_REFERENCE",
                         os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "bench-reference")))


def load_reference():
    path = os.path.join(REF_DIR, "seq2seq_bench.py")
    if not os.path.exists(path):
        sys.exit(f"seq2seq_ddp_torch.py: the shared baseline {path} is missing (set QKV_BENCH_REFERENCE)")
    spec = importlib.util.spec_from_file_location("seq2seq_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def worker(rank, a):
    torch.set_num_threads(a.threads)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(a.port)
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks)
    ref = load_reference()
    cfg = argparse.Namespace(vocab=8000, d=256, heads=4, enc=3, dec=3, dff=1024, dropout=0.1)
    model = torch.nn.parallel.DistributedDataParallel(ref.build(cfg).train())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    gen = torch.Generator().manual_seed(1)  # the same global batch on every rank
    B, L, rows = 64, 32, 64 // a.ranks
    times = []
    for step in range(3 + a.steps):
        src = torch.randint(3, 8000, (B, L), generator=gen)[rank * rows:(rank + 1) * rows]
        tgt = torch.randint(3, 8000, (B, L), generator=gen)[rank * rows:(rank + 1) * rows]
        tgt_in = torch.cat([torch.ones(rows, 1, dtype=torch.long), tgt[:, :-1]], 1)
        dist.barrier()
        t0 = time.perf_counter()
        logits = model(src, tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, 8000), tgt.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()  # DDP all-reduces the gradients (bucketed, overlapped with backward)
        opt.step()
        dt = time.perf_counter() - t0
        if step >= 3:
            times.append(dt)
    if rank == 0:
        print(json.dumps(dict(ranks=a.ranks, threads=a.threads, step_time_s_median=statistics.median(times),
                              tgt_tokens_per_s_median=statistics.median([B * L / t for t in times]))))
    dist.destroy_process_group()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--port", type=int, default=29500 + os.getpid() % 1000)
    a = p.parse_args()
    mp.spawn(worker, args=(a,), nprocs=a.ranks, join=True)
