// bench_gpt_batch: GPT-2 124M decoding at a few rows a step, as beam search and small batches run
// it, against one row: ms per decoding step (64 new tokens after a 16-token prompt, prefill
// included, divided by 64) for greedy decoding of 1, 2, 3 and 4 prompts and for beam search with
// 4 beams on one prompt (4 rows a step), through tasks::Generator. Random weights in GPT-2's
// shapes (vocab 50257, d 768, 12 layers, 12 heads, d_ff 3072; seed 0, as bench_gpt_generate),
// eos off, so every run generates 64 tokens. One warm-up of each, then `reps` rounds, the cases
// alternating within a round; the medians, and each against batch 1. At batch 1 a step reads the
// whole 500 MB of f32 weights; at 4 rows it reads them once too, with 4x the arithmetic, so the
// ratio says how far the products stay memory-bound. No PyTorch side: the shared reference
// scripts have no beam search, and Hugging Face's transformers is not installable here.
// Run: OMP_NUM_THREADS=2 GOMP_SPINCOUNT=5000 build/bench/bench_gpt_batch [reps=5]
//      [precision=fp32|bf16]
// OPENBLAS_CORETYPE=SkylakeX belongs in that line on an AVX-512 CPU only (README, "Threads").
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "qkv/kernels/bf16.h"
#include "qkv/tasks/generator.h"
#include "qkv/tensor/rng.h"

using namespace qkv;

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  const std::string precision = argc > 2 ? argv[2] : "fp32";
  if (reps < 1 || (precision != "fp32" && precision != "bf16")) {
    std::fprintf(stderr, "usage: bench_gpt_batch [reps >= 1] [fp32|bf16]\n");
    return 2;
  }
  constexpr int64_t kPrompt = 16, kNew = 64;
  models::GptConfig cfg;  // GPT-2 124M's shapes
  cfg.activation_function = "gelu";
  Generator init(0);
  io::GptBundle b;
  b.config = cfg;
  b.model = std::make_shared<models::Gpt>(cfg, init);
  tasks::Generator gen(b, /*eos_id=*/-1);
  const bool bf16 = precision == "bf16";
  if (bf16) gen.hold_weights_in_bf16();  // as `qkv generate --precision bf16`
  Generator pick(1);
  std::vector<std::vector<int64_t>> prompts(4, std::vector<int64_t>(kPrompt));
  for (auto& p : prompts)
    for (auto& t : p) t = int64_t(pick.randint(uint64_t(cfg.vocab_size)));

  struct Case {
    const char* name;
    int64_t prompts, beams;
  };
  const std::vector<Case> cases = {{"greedy, 1 prompt", 1, 1}, {"greedy, 2 prompts", 2, 1},
                                   {"greedy, 3 prompts", 3, 1}, {"greedy, 4 prompts", 4, 1},
                                   {"beam search, 4 beams, 1 prompt", 1, 4}};
  std::vector<std::vector<double>> ms(cases.size());
  for (int r = 0; r <= reps; ++r)
    for (size_t c = 0; c < cases.size(); ++c) {
      tasks::GenerateOptions o;
      o.max_new_tokens = kNew, o.eos_id = -1, o.num_beams = cases[c].beams, o.batch_size = cases[c].prompts;
      o.precision = bf16 ? kernels::MatmulPrecision::bf16 : kernels::MatmulPrecision::fp32;
      const std::vector<std::vector<int64_t>> p(prompts.begin(), prompts.begin() + cases[c].prompts);
      const double t0 = bench::now_ms();
      const auto out = gen.generate_ids(p, o);
      const double step = (bench::now_ms() - t0) / double(kNew);
      if (out[0].tokens.size() != size_t(kNew))
        std::fprintf(stderr, "%s: %zu tokens\n", cases[c].name, out[0].tokens.size());
      if (r > 0) ms[c].push_back(step);  // round 0: the warm-up
    }
  std::printf("GPT-2 124M (random weights), %s, %d rounds; ms per decoding step, median (min-max), and / 1 prompt:\n",
              precision.c_str(), reps);
  const double one = bench::median(ms[0]);
  for (size_t c = 0; c < cases.size(); ++c) {
    const auto [lo, hi] = std::minmax_element(ms[c].begin(), ms[c].end());
    std::printf("  %-32s %7.2f (%.2f-%.2f)  %.2fx\n", cases[c].name, bench::median(ms[c]), *lo, *hi,
                bench::median(ms[c]) / one);
  }
  return 0;
}
