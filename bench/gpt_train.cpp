// bench_gpt_train: GPT training speed (forward, backward, AdamW step), fp32, random tokens, the
// two training shapes of /work/shared/bench-reference/gpt_bench.py:
//   cfg1   vocab 8192, ctx 256, d 256, 4 heads, 4 layers, d_ff 1024, batch 16
//   cfg2   vocab 8192, ctx 128, d 512, 8 heads, 6 layers, d_ff 2048, batch 8
// As the reference: pre-LN blocks, exact GELU, no dropout, mean cross-entropy over every
// position, AdamW(lr 3e-4, weight decay 0.1), new random ids and targets each step; the step
// time covers forward, loss, zero_grad, backward and the optimizer step. qkv's head is tied to
// the token embedding (GPT-2's), the reference's is a separate Linear of the same shape: the same
// FLOPs, one (V, D) matrix (and its gradient and Adam moments) fewer for qkv.
// Prints tokens/s (median over the timed steps, also min and max), the loss of the first and the
// last step and the peak RSS of this process: run one configuration per process.
//
// Run (with OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE):
//   build/bench/bench_gpt_train cfg1|cfg2 [warmup=3] [steps=10|paired] [fp32|bf16|bf16-percall|products]
// OPENBLAS_CORETYPE=SkylakeX belongs in that line on an AVX-512 CPU only (README, "Threads").
// steps = "paired": after the warm-up, print "ready" and run one step per "step" line on stdin,
// answering with the step's wall ms, until end of input; tools/bench/paired.py drives it,
// alternating single steps with the reference's in one sitting (the fairest ratio on a shared
// machine).
// bf16: every matrix product of the step under a MatmulPrecisionScope (kernels/bf16.h), as
// train.precision "bf16" runs it (weights converted once per step, kernels/bf16_step_weights.h);
// bf16-percall: without the step's weight copies (both operands rounded at every product).
// Compare with the reference's --bf16 (autocast).
// products (instead of fp32|bf16): the step's fp32 Linear products alone (forward x W^T, dX = dY W,
// dW = dY^T X for every layer's four weights and the tied head), each shape through kernels::gemm,
// with the operands in cache and again after a 256 MiB write evicts the caches before each call:
// what a step's products would take at each speed, to set against the step.
// and in the same sitting:
//   OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 /work/shared/bench-reference/gpt_bench.py train
//     --d 256 --heads 4 --layers 4 --dff 1024 --ctx 256 --batch 16        (cfg1; V 8192 is its default)
//   ... train --d 512 --heads 8 --layers 6 --dff 2048 --ctx 128 --batch 8  (cfg2)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_util.h"
#include "qkv/autograd/node.h"
#include "qkv/kernels/bf16.h"
#include "qkv/kernels/bf16_step_weights.h"
#include "qkv/kernels/gemm.h"
#include "qkv/models/gpt.h"
#include "qkv/ops/loss.h"
#include "qkv/tensor/rng.h"
#include "qkv/train/optim.h"

using namespace qkv;

namespace {

// The fp32 products of one step of `cfg` at `rows` = batch x context rows, hot and cold.
int bench_products(const models::GptConfig& cfg, int64_t rows) {
  struct Product {
    const char* name;
    bool ta, tb;
    int64_t M, N, K, count;
  };
  const int64_t d = cfg.n_embd, ff = cfg.n_inner, V = cfg.vocab_size, L = cfg.n_layer;
  std::vector<Product> ps;
  for (auto [name, out, in, count] : {std::tuple<const char*, int64_t, int64_t, int64_t>{"qkv", 3 * d, d, L},
                                      {"proj", d, d, L}, {"fc1", ff, d, L}, {"fc2", d, ff, L}, {"head", V, d, 1}}) {
    ps.push_back({name, false, true, rows, out, in, count});    // y = x W^T
    ps.push_back({"  dX", false, false, rows, in, out, count});  // dX = dY W
    ps.push_back({"  dW", true, false, out, in, rows, count});   // dW = dY^T X
  }
  int64_t largest = 0;  // elements of the largest operand or result (cfg1's head: rows x V)
  for (const Product& p : ps) largest = std::max({largest, p.M * p.K, p.K * p.N, p.M * p.N});
  Generator g(3);
  std::vector<float> a(static_cast<size_t>(largest)), b(a.size()), c(a.size());
  g.normal(a.data(), int64_t(a.size()));
  g.normal(b.data(), int64_t(b.size()));
  std::vector<float> evict(size_t(64) << 20);  // 256 MiB
  double hot_ms = 0, cold_ms = 0, flops = 0;
  std::printf("%-6s %6s %6s %6s  %9s %9s\n", "", "M", "N", "K", "hot GF/s", "cold GF/s");
  for (const Product& p : ps) {
    const int64_t lda = p.ta ? p.M : p.K, ldb = p.tb ? p.K : p.N;
    auto run = [&] { kernels::gemm(p.ta, p.tb, p.M, p.N, p.K, 1.f, a.data(), lda, b.data(), ldb, 0.f, c.data(), p.N); };
    std::vector<double> hot, cold;
    for (int r = 0; r < 11; ++r) {
      double t0 = bench::now_ms();
      run();
      hot.push_back(bench::now_ms() - t0);
#pragma omp parallel for schedule(static)
      for (size_t i = 0; i < evict.size(); ++i) evict[i] += 1.f;
      t0 = bench::now_ms();
      run();
      cold.push_back(bench::now_ms() - t0);
    }
    const double f = 2.0 * double(p.M * p.N * p.K), h = bench::median(hot), cd = bench::median(cold);
    std::printf("%-6s %6lld %6lld %6lld  %9.0f %9.0f  (x%lld per step)\n", p.name, (long long)p.M, (long long)p.N,
                (long long)p.K, f / h * 1e-6, f / cd * 1e-6, (long long)p.count);
    hot_ms += h * double(p.count), cold_ms += cd * double(p.count), flops += f * double(p.count);
  }
  std::printf("a step's products: %.1f GFLOP; %.1f ms hot (%.0f GF/s), %.1f ms cold (%.0f GF/s)\n", flops * 1e-9,
              hot_ms, flops / hot_ms * 1e-6, cold_ms, flops / cold_ms * 1e-6);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "cfg1";
  const bool paired = argc > 3 && std::string(argv[3]) == "paired";
  const int warmup = argc > 2 ? std::atoi(argv[2]) : 3, steps = argc > 3 && !paired ? std::atoi(argv[3]) : 10;
  const std::string precision_arg = argc > 4 ? argv[4] : "fp32";
  const bool products = precision_arg == "products";
  const bool step_copies = precision_arg != "bf16-percall";
  const kernels::MatmulPrecision precision =
      kernels::parse_precision(products ? "fp32" : step_copies ? precision_arg : "bf16");
  if (precision == kernels::MatmulPrecision::int8) {  // training products are recorded: int8 would run fp32
    std::fprintf(stderr, "precision int8 is for inference only: train in fp32 or bf16\n");
    return 2;
  }
  const kernels::MatmulPrecisionScope precision_scope(precision);
  models::GptConfig cfg;
  int64_t batch = 0;
  cfg.vocab_size = 8192;
  if (name == "cfg1") {
    cfg.n_positions = 256, cfg.n_embd = 256, cfg.n_head = 4, cfg.n_layer = 4, cfg.n_inner = 1024, batch = 16;
  } else if (name == "cfg2") {
    cfg.n_positions = 128, cfg.n_embd = 512, cfg.n_head = 8, cfg.n_layer = 6, cfg.n_inner = 2048, batch = 8;
  } else {
    std::fprintf(stderr,
                 "usage: bench_gpt_train cfg1|cfg2 [warmup] [steps|paired] [fp32|bf16|bf16-percall|products]\n");
    return 2;
  }
  cfg.activation_function = "gelu";
  cfg.resid_pdrop = cfg.embd_pdrop = cfg.attn_pdrop = 0.0;
  const int64_t T = cfg.n_positions, V = cfg.vocab_size;
  if (products) return bench_products(cfg, batch * T);

  Generator init(0), data(1);
  models::Gpt model(cfg, init);
  model.train();
  auto opt = make_optimizer(nlohmann::json{{"type", "adamw"}, {"lr", 3e-4}, {"weight_decay", 0.1}}, "bench", model);

  std::vector<double> tps;
  double loss_first = 0, loss_last = 0;
  char line[64];
  for (int s = 0; paired || s < warmup + steps; ++s) {
    if (paired && s == warmup) std::printf("ready\n");
    if (paired && s >= warmup) {
      std::fflush(stdout);
      if (!std::fgets(line, sizeof line, stdin)) break;
    }
    std::vector<int64_t> x(size_t(batch * T)), y(size_t(batch * T));
    for (auto& t : x) t = int64_t(data.randint(uint64_t(V)));
    for (auto& t : y) t = int64_t(data.randint(uint64_t(V)));
    Tensor ids = Tensor::from_vector(x, {batch, T}), targets = Tensor::from_vector(y, {batch, T});  // (B, T)
    const double t0 = bench::now_ms();
    Tensor loss;
    {
      std::optional<kernels::Bf16StepWeights> copies;  // as the trainer: weights converted once per step
      if (precision == kernels::MatmulPrecision::bf16 && step_copies) copies.emplace(model.parameters());
      loss = model.lm_loss(ids, targets);  // as the trainer: no (B, T, V) logits in memory
      opt->zero_grad();
      backward(loss);
    }
    opt->step();
    const double ms = bench::now_ms() - t0;
    loss_last = loss.item();
    if (s == 0) loss_first = loss_last;
    if (s >= warmup) tps.push_back(double(batch * T) / (ms / 1e3));
    if (paired && s >= warmup) std::printf("%.3f\n", ms);
  }
  if (tps.empty()) return 0;
  double lo = tps[0], hi = tps[0];
  for (double v : tps) lo = std::min(lo, v), hi = std::max(hi, v);
  std::printf("{\"bench\": \"gpt_train\", \"cfg\": \"%s\", \"precision\": \"%s\", \"params\": %lld, \"tokens_per_step\": %lld, "
              "\"threads\": %d, \"tokens_per_s_median\": %.1f, \"tokens_per_s_min\": %.1f, \"tokens_per_s_max\": %.1f, "
              "\"loss_first\": %.4f, \"loss_last\": %.4f, \"peak_rss_MiB\": %.1f}\n",
              name.c_str(), step_copies ? kernels::precision_name(precision) : "bf16-percall",
              (long long)model.num_parameters(), (long long)(batch * T), bench::env_threads(),
              bench::median(tps), lo, hi, loss_first, loss_last, bench::peak_rss_mib());
  return 0;
}
