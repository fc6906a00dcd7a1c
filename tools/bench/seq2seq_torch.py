#!/usr/bin/python3
"""seq2seq_torch.py - runs the shared PyTorch baseline (../shared/bench-reference/seq2seq_bench.py)
for bench/seq2seq.cpp and bench/seq2seq_decode.cpp, adding process CPU time.

The shared script is imported, not copied: its model, its train() and decode() timing loops and
its arguments are the ones that run (train | decode, same flags). Its loops time a step as
`t0 = time.perf_counter(); <work>; dt = time.perf_counter() - t0`; this wrapper hands the module a
clock that also reads time.process_time() at each of those calls, so every timed interval gets
its CPU time (user + system, all threads: the figure to compare on a shared machine) without
touching the loop. The shared JSON is printed with cpu_s_median (and wall_s_median) added.

--bf16 (train only) runs the shared model's forward under torch.autocast(cpu, bfloat16) and returns
its logits in fp32 for the loss, as the shared GPT script's --bf16 does (the shared seq2seq script
has no bf16 mode).

--beam K > 1 (decode only) is the other addition the shared script lacks: beam search over the
shared model (K rows per sentence, log-softmax scores, top-K of the K*V extensions, rows
reordered every step; the same 32 steps, no EOS stop), timed by the same kind of loop.

The shared script's directory: $QKV_BENCH_REFERENCE, else ../shared/bench-reference next to the
repository.
  /usr/bin/python3 seq2seq_torch.py train [shared flags] [--bf16]
  /usr/bin/python3 seq2seq_torch.py decode [shared flags] [--beam 4]
"""
import contextlib
import importlib.util
import io
import json
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REF_DIR = os.environ.get("QKV_BENCH_REFERENCE",
                         os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "bench-reference")))


def load_reference():
    path = os.path.join(REF_DIR, "seq2seq_bench.py")
    if not os.path.exists(path):
        sys.exit(f"seq2seq_torch.py: the shared baseline {path} is missing (set QKV_BENCH_REFERENCE)")
    spec = importlib.util.spec_from_file_location("seq2seq_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class RecordingClock:
    """Stands in for the `time` module inside the shared script: perf_counter() also records the
    process CPU time, so consecutive (start, end) calls give each timed interval's CPU seconds."""

    def __init__(self):
        self.marks = []

    def perf_counter(self):
        self.marks.append(time.process_time())
        return time.perf_counter()

    def __getattr__(self, name):
        return getattr(time, name)

    def intervals(self):
        return [b - a for a, b in zip(self.marks[0::2], self.marks[1::2])]


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


def beam_decode(ref, a):
    model = ref.build(a).eval()
    src = torch.randint(3, a.vocab, (a.dbatch, a.src_len))
    beam_search(model, src, 4, a.beam)  # warm-up
    ts, cpu = [], []
    for _ in range(a.reps):
        c0, t0 = time.process_time(), time.perf_counter()
        beam_search(model, src, a.max_len, a.beam)
        ts.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    sps = [a.dbatch / t for t in ts]
    print(json.dumps(dict(mode="decode", beam=a.beam, batch=a.dbatch, src_len=a.src_len, max_len=a.max_len,
                          threads=torch.get_num_threads(), sentences_per_s_median=statistics.median(sps),
                          wall_s_median=statistics.median(ts), cpu_s_median=statistics.median(cpu),
                          reps=a.reps, peak_rss_MiB=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                     indent=1))


def autocast_forward(ref):
    """Makes the shared script's build() return its model with the forward under bf16 autocast."""
    build = ref.build

    def build_autocast(a):
        model = build(a)
        forward = model.forward

        def forward_bf16(*args, **kwargs):
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
                return forward(*args, **kwargs).float()

        model.forward = forward_bf16
        return model

    ref.build = build_autocast


def main():
    ref = load_reference()
    argv = sys.argv[1:]
    beam = 1
    if "--beam" in argv:  # ours; the shared parser does not know it
        i = argv.index("--beam")
        beam = int(argv[i + 1])
        del argv[i:i + 2]
    if "--bf16" in argv:  # ours too
        argv.remove("--bf16")
        if not argv or argv[0] != "train":
            sys.exit("seq2seq_torch.py: --bf16 applies to train only")
        autocast_forward(ref)
    if beam > 1:
        if not argv or argv[0] != "decode":
            sys.exit("seq2seq_torch.py: --beam applies to decode only")
        a = ref_args(ref, argv)
        a.beam = beam
        beam_decode(ref, a)
        return
    clock = RecordingClock()
    ref.time = clock  # the shared loops read their clock through the module's `time`
    out = io.StringIO()
    sys.argv = [ref.__file__] + argv
    with contextlib.redirect_stdout(out):
        run_reference_main(ref)
    result = json.loads(out.getvalue())
    cpu = clock.intervals()
    if result["mode"] == "train":  # warm-up steps are timed too, then dropped, as the shared loop does
        a = ref_args(ref, argv)
        cpu = cpu[a.warmup:]
    result["cpu_s_median"] = statistics.median(cpu)
    if result["mode"] == "decode":
        result["wall_s_median"] = result["batch"] / result["sentences_per_s_median"]
    print(json.dumps(result, indent=1))


def ref_args(ref, argv):
    """The shared script's own argument parser applied to argv (its __main__ block builds it)."""
    captured = {}

    def fake_run(a):
        captured["a"] = a

    saved = (ref.train, ref.decode, sys.argv)
    ref.train = ref.decode = fake_run
    sys.argv = [ref.__file__] + argv
    try:
        run_reference_main(ref)
    finally:
        ref.train, ref.decode, sys.argv = saved
    return captured["a"]


def run_reference_main(ref):
    """Executes the shared script's `if __name__ == "__main__":` block in the module's namespace."""
    src = open(ref.__file__).read()
    marker = 'if __name__ == "__main__":'
    body = src[src.index(marker) + len(marker):]
    code = "\n".join(line[4:] if line.startswith("    ") else line for line in body.splitlines())
    exec(compile(code, ref.__file__ + ":__main__", "exec"), ref.__dict__)


if __name__ == "__main__":
    main()
