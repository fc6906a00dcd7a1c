// bench_seq2seq: Transformer encoder-decoder training throughput (target tokens/s) against
// torch.nn.Transformer in the same run, the qkv side of /work/shared/bench-reference/seq2seq_bench.py
// train (issue #5):
//   d 256, 4 heads, 3 + 3 post-LN layers, d_ff 1024, ReLU, dropout 0.1 (sublayer outputs, attention
//   weights, inside the FFN), vocab 8000, one embedding table shared by source and target
//   (* sqrt(d) + sinusoidal positions), a separate output Linear(256, 8000), f32;
//   AdamW lr 3e-4, weight decay 0.01 on every parameter; batch 64, source and target length 32
//   (decoder input = BOS + 31 target tokens), uniform random tokens in [3, 8000); one step =
//   forward + mean cross-entropy + zero_grad + backward + optimizer step.
// Structural differences that remain (TransformerConfig cannot express them; both are small):
//   torch.nn.Transformer puts a final LayerNorm after each stack even when post-LN (qkv's post-LN
//   stacks end with the last block's LayerNorm), and torch's script applies no dropout to the
//   embeddings (qkv's Transformer does, as the paper).
// Rounds alternate qkv and the torch child (tools/bench/seq2seq_torch.py train: the shared
// ../shared/bench-reference/seq2seq_bench.py itself, imported, with process CPU time recorded
// around its timed steps) so that both see the same load.
// Run: OMP_NUM_THREADS=2 GOMP_SPINCOUNT=5000
//        build/bench/bench_seq2seq [rounds=3] [steps=10] [fp32|bf16] [qkv-only]   (one command line)
// OPENBLAS_CORETYPE=SkylakeX belongs in that line on an AVX-512 CPU only (README, "Threads").
// qkv-only: no torch child between qkv's rounds (for comparing qkv's own precisions or builds:
// torch's run between rounds leaves qkv's bf16 steps a wider spread).
// bf16: qkv's steps run their matrix products in bf16 (train.precision "bf16"), torch's under its CPU
// autocast to bfloat16 (seq2seq_torch.py --bf16: the shared script's model with its forward wrapped,
// as the shared GPT script's --bf16 does).
// GOMP_SPINCOUNT=5000 is qkv's own default wait policy (util/blas_env.h); the torch child
// inherits the same environment (bench::torch_command), and a short spin is faster for it too
// than OMP_WAIT_POLICY=PASSIVE here. OMP_WAIT_POLICY=PASSIVE instead runs both sides passive.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "qkv/autograd/node.h"
#include "qkv/kernels/bf16.h"
#include "qkv/kernels/bf16_step_weights.h"
#include "qkv/kernels/gemm.h"
#include "qkv/models/transformer.h"
#include "qkv/ops/loss.h"
#include "qkv/ops/shape.h"
#include "qkv/tensor/rng.h"
#include "qkv/train/optim.h"

using namespace qkv;
using bench::cpu_ms;
using bench::median;
using bench::now_ms;

namespace {

constexpr int64_t kVocab = 8000, kBatch = 64, kSrcLen = 32, kTgtLen = 32;

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

// (B, T) i64 tokens uniform in [3, vocab).
Tensor random_tokens(Generator& g, int64_t B, int64_t T) {
  std::vector<int64_t> v(size_t(B * T));
  for (auto& x : v) x = 3 + int64_t(g.randint(uint64_t(kVocab - 3)));
  return Tensor::from_vector<int64_t>(v, {B, T});
}

struct Times {
  std::vector<double> tok_s, cpu_ms;  // per timed step
};

// `warmup` untimed then `steps` timed training steps.
Times train_qkv(models::Transformer& model, AdamW& opt, Generator& data, int warmup, int steps) {
  Times t;
  for (int i = 0; i < warmup + steps; ++i) {
    Tensor src = random_tokens(data, kBatch, kSrcLen);  // (B, S)
    Tensor tgt = random_tokens(data, kBatch, kTgtLen);  // (B, T)
    std::vector<int64_t> in = tgt.to_vector<int64_t>();  // BOS + tgt[:, :-1]
    for (int64_t b = 0; b < kBatch; ++b) {
      for (int64_t j = kTgtLen - 1; j > 0; --j) in[size_t(b * kTgtLen + j)] = in[size_t(b * kTgtLen + j - 1)];
      in[size_t(b * kTgtLen)] = 1;
    }
    Tensor tgt_in = Tensor::from_vector<int64_t>(in, {kBatch, kTgtLen});
    double c0 = cpu_ms(), t0 = now_ms();
    {
      std::optional<kernels::Bf16StepWeights> copies;  // as the trainer: weights converted once per step
      if (kernels::matmul_precision() == kernels::MatmulPrecision::bf16) copies.emplace(model.parameters());
      // as the trainer: the generator and the loss together, no (B, T, V) logits in memory
      Tensor loss = model.loss(src, Tensor(), tgt_in, tgt, -100, 0.0, Reduction::mean);
      opt.zero_grad();
      backward(loss);
    }
    opt.step();
    double t1 = now_ms(), c1 = cpu_ms();
    if (i >= warmup) {
      t.tok_s.push_back(double(kBatch * kTgtLen) / ((t1 - t0) * 1e-3));
      t.cpu_ms.push_back(c1 - c0);
    }
  }
  return t;
}

struct TorchRun {
  double tok_s = -1, cpu_ms = -1, rss_mib = -1;
};

TorchRun train_torch(int steps, int threads, bool bf16) {
  std::string out = bench::run_capture(
      bench::torch_command("tools/bench/seq2seq_torch.py", "train --steps " + std::to_string(steps) + " --threads " +
                                                               std::to_string(threads) + (bf16 ? " --bf16" : "")));
  TorchRun r;
  r.tok_s = bench::find_number(out, "\"tgt_tokens_per_s_median\":");
  double cpu_s = bench::find_number(out, "\"cpu_s_median\":");
  r.cpu_ms = cpu_s > 0 ? cpu_s * 1e3 : -1;
  r.rss_mib = bench::find_number(out, "\"peak_rss_MiB\":");
  if (r.tok_s <= 0) std::fprintf(stderr, "torch child printed:\n%s\n", out.c_str());
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 10;
  const kernels::MatmulPrecision precision = kernels::parse_precision(argc > 3 ? argv[3] : "fp32");
  if (precision == kernels::MatmulPrecision::int8) {  // training products are recorded: int8 would run fp32
    std::fprintf(stderr, "precision int8 is for inference only: train in fp32 or bf16\n");
    return 2;
  }
  const bool qkv_only = argc > 4 && std::string(argv[4]) == "qkv-only";
  if (argc > 4 && !qkv_only) {
    std::fprintf(stderr, "the fourth argument is qkv-only or nothing, got '%s'\n", argv[4]);
    return 2;
  }
  const int threads = bench::env_threads();
  if (kernels::blas_core_is_degraded())
    std::printf("WARNING: OpenBLAS runs its SSE3 kernels (core %s): export OPENBLAS_CORETYPE=SkylakeX\n",
                kernels::blas_core());

  const models::TransformerConfig cfg = bench::reference_transformer_config(kVocab);
  Generator init(0);
  models::Transformer model(cfg, init);
  model.train();
  AdamW opt(single_group(model.parameters()), 3e-4, {0.9, 0.999}, 1e-8, 0.01);
  Generator data(1);

  std::printf("seq2seq train: d 256 h 4 3+3 post-LN ff 1024 vocab 8000 (shared emb, separate output), "
              "dropout 0.1, AdamW; B %lld S %lld T %lld; %lld params; %d threads; BLAS core %s; qkv precision %s; "
              "load %s\n",
              (long long)kBatch, (long long)kSrcLen, (long long)kTgtLen, (long long)model.num_parameters(), threads,
              kernels::blas_core(), kernels::precision_name(precision), loadavg().c_str());
  std::vector<double> q_tok, q_cpu, t_tok, t_cpu, t_rss;  // per-round medians
  for (int r = 0; r < rounds; ++r) {
    Times q;
    {
      const kernels::MatmulPrecisionScope scope(precision);
      q = train_qkv(model, opt, data, r == 0 ? 3 : 1, steps);
    }
    q_tok.push_back(median(q.tok_s));
    q_cpu.push_back(median(q.cpu_ms));
    if (qkv_only) {
      std::printf("round %d: qkv %.0f tok/s, cpu %.1f ms/step | load %s\n", r, q_tok.back(), q_cpu.back(),
                  loadavg().c_str());
      continue;
    }
    TorchRun t = train_torch(steps, threads, precision == kernels::MatmulPrecision::bf16);
    if (t.tok_s > 0) {
      t_tok.push_back(t.tok_s);
      t_cpu.push_back(t.cpu_ms);
      t_rss.push_back(t.rss_mib);
    }
    std::printf("round %d: qkv %.0f tok/s, cpu %.1f ms/step | torch %.0f tok/s, cpu %.1f ms/step | load %s\n", r,
                q_tok.back(), q_cpu.back(), t.tok_s, t.cpu_ms, loadavg().c_str());
  }
  if (qkv_only) {
    std::printf("| seq2seq train step (B 64, 32+32 tokens), %s | qkv %.0f tok/s | qkv cpu %.1f ms/step | qkv peak RSS "
                "%.0f MiB |\n",
                kernels::precision_name(precision), median(q_tok), median(q_cpu), bench::peak_rss_mib());
    return 0;
  }
  if (t_tok.empty()) {
    std::printf("torch failed to run\n");
    return 1;
  }
  const double qt = median(q_tok), tt = median(t_tok), qc = median(q_cpu), tc = median(t_cpu);
  std::printf("| seq2seq train step (B 64, 32+32 tokens) | qkv %.0f tok/s | torch %.0f tok/s | qkv/torch %.2fx | "
              "qkv cpu %.1f ms/step | torch cpu %.1f ms/step | torch/qkv cpu %.2fx | qkv peak RSS %.0f MiB | "
              "torch peak RSS %.0f MiB |\n",
              qt, tt, qt / tt, qc, tc, tc > 0 ? tc / qc : -1.0, bench::peak_rss_mib(), median(t_rss));
  return 0;
}
