// bench_gpt_generate: greedy GPT generation speed through tasks::Generator (KV cache, fused
// single-query attention, packed weights), batch 1, a 16-token prompt, 128 new tokens; prefill
// included in the time, as /work/shared/bench-reference/gpt_bench.py gen measures torch.
//
// Shapes (random weights, normal(0, 0.02), pre-LN, GELU, eval, f32; qkv's head is tied to the
// token embedding, the reference's is a separate Linear of the same size: same cost):
//   cfg1   vocab 8192, ctx 256, d 256, 4 heads, 4 layers, d_ff 1024 (gpt_bench.py's gen shape)
//   gpt2   vocab 50257, ctx 1024, d 768, 12 heads, 12 layers, d_ff 3072 (GPT-2 124M)
// Per shape: one warm-up, then the median of `reps` timed generations: ms per new token and
// tokens/s, from wall and process-CPU time, and a checksum of the generated ids.
// The bandwidth floor: a token at batch 1 reads every f32 weight once (the tied head included)
// and the KV cache so far, so no implementation can beat (those bytes) / (the machine's memory
// bandwidth). The bandwidth is a STREAM-style triad (bench::triad_gbs) measured just before and
// just after the shape's timing; the floor uses the faster of the two, so it is the lower bound.
// Two triads: 64 MiB arrays (the figure earlier sittings used) and arrays of 4x the last-level
// cache (STREAM's rule; on a CPU with a 260 MiB L3 the 64 MiB one is partly a cache figure).
// Then `reps` more generations alternate with STREAM-sized triads, each held against the faster
// triad beside it: the paired ratio, robust to the bandwidth drifting during the sitting.
// Peak RSS: VmHWM, reset after the first triads, so the model, its packed weights and the
// generations (the process's earlier shapes are freed by then); and "during generation", the
// mark reset again once the model is built: what a long-running process holds.
// Precision bf16 or int8 alone: the model holds its weights in bf16 / int8
// (nn::Module::hold_weights_in_bf16 / _in_int8), as `qkv generate --precision bf16 / int8` does;
// with fp32 alongside it keeps f32 weights and bf16 / int8 packs.
//
// Run (one line): OMP_NUM_THREADS=2 GOMP_SPINCOUNT=5000
//        build/bench/bench_gpt_generate [reps=5] [shapes=cfg1,gpt2] [precision=fp32|bf16|int8|both|LIST]
//        [layout=auto|rows|panels|both]
// OPENBLAS_CORETYPE=SkylakeX belongs in that line on an AVX-512 CPU only (README, "Threads").
// (precision: GenerateOptions::precision; a comma-separated list (both = fp32,bf16) alternates
// the generations and reports each against the first: the speed-up and how many tokens agree.
// layout: the fp32 and bf16 products' kernels::PackLayout; auto is what tasks::Generator chooses
// for the shape and precision (decoding_layout: fp32 panels for cfg1, rows for GPT-2 124M; bf16
// rows); both alternates a rows and a panels model, the same weights, in one sitting, and the
// peak RSS is then of the two together)
// (GOMP_SPINCOUNT=5000 is what the qkv program sets for itself, util/blas_env.h; without it
// libgomp's long default spin made cfg1 ~10x slower while another build shared the 2 cores.)
// and in the same sitting:
//   /usr/bin/python3 /work/shared/bench-reference/gpt_bench.py gen --d 256 --heads 4 --layers 4 --dff 1024 --ctx 256
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "qkv/kernels/bf16.h"
#include "qkv/tasks/generator.h"
#include "qkv/tensor/rng.h"

using namespace qkv;

namespace {

constexpr int64_t kPrompt = 16, kNew = 128;

struct Variant {
  kernels::MatmulPrecision precision;
  kernels::PackLayout layout;
  bool generator_layout = false;  // layout: tasks::Generator::decoding_layout's choice for the shape
};

struct Timing {
  std::vector<double> wall, cpu;  // ms per generation
  std::vector<int64_t> tokens;    // the last generation's
  int64_t checksum = 0;
};

void run(const std::string& name, models::GptConfig cfg, int reps, std::vector<Variant> variants, bool hold) {
  cfg.activation_function = "gelu";
  // The triads first, then the peak-RSS mark reset: the peak below is the model's and its
  // generation's, not the triad arrays'.
  const int64_t stream_bytes = bench::stream_array_bytes();
  const double triad_before = bench::triad_gbs(), stream_before = bench::triad_gbs(10, stream_bytes);
  const bool hwm_reset = bench::reset_peak_rss();
  // One model per layout, each from seed 0 (the same weights), its layout set after the
  // Generator's own choice (which "auto" variants take).
  auto build = [&] {
    Generator init(0);
    return std::make_shared<models::Gpt>(cfg, init);
  };
  std::shared_ptr<models::Gpt> first = build();
  for (Variant& v : variants)
    if (v.generator_layout) v.layout = tasks::Generator::decoding_layout(*first, v.precision);
  std::vector<std::unique_ptr<tasks::Generator>> gens(2);
  io::GptBundle b;
  b.config = cfg;
  for (const Variant& v : variants) {
    auto& g = gens[size_t(v.layout)];
    if (g) continue;
    b.model = first ? std::exchange(first, nullptr) : build();
    g = std::make_unique<tasks::Generator>(b, /*eos_id=*/-1);
    b.model->set_pack_layout(v.layout);
    if (hold && v.precision == kernels::MatmulPrecision::bf16) g->hold_weights_in_bf16();  // as `qkv generate` does
    if (hold && v.precision == kernels::MatmulPrecision::int8) g->hold_weights_in_int8();
  }
  // The peak while building (f32 weights, then held in bf16 / int8 if asked), then the mark reset again:
  // the peak of generation alone, what a long-running process (qkv serve) holds.
  const double build_rss = hwm_reset ? bench::peak_since_reset_mib() : bench::peak_rss_mib();
  const bool gen_reset = hwm_reset && bench::reset_peak_rss();
  Generator pick(1);
  std::vector<int64_t> prompt(kPrompt);
  for (auto& t : prompt) t = int64_t(pick.randint(uint64_t(cfg.vocab_size)));
  tasks::GenerateOptions o;
  o.max_new_tokens = kNew;
  o.eos_id = -1;
  std::vector<Timing> timing(variants.size());
  for (int r = 0; r <= reps; ++r) {
    for (size_t p = 0; p < variants.size(); ++p) {  // variants alternate: all see the same machine load
      o.precision = variants[p].precision;
      const double w0 = bench::now_ms(), c0 = bench::cpu_ms();
      auto out = gens[size_t(variants[p].layout)]->generate_ids({prompt}, o);
      const double w = bench::now_ms() - w0, c = bench::cpu_ms() - c0;
      if (out[0].tokens.size() != size_t(kNew))
        std::fprintf(stderr, "%s: generated %zu tokens\n", name.c_str(), out[0].tokens.size());
      Timing& t = timing[p];
      t.checksum = 0;
      for (int64_t tok : out[0].tokens) t.checksum = t.checksum * 1000003 + tok;
      t.tokens = out[0].tokens;
      if (r == 0) continue;  // warm-up (and, for bf16, the one conversion of the weights)
      t.wall.push_back(w);
      t.cpu.push_back(c);
    }
  }
  auto label = [&](const Variant& v) {  // "fp32 rows", "bf16 panels", "int8" (whose weights have no layout)
    const bool int8 = v.precision == kernels::MatmulPrecision::int8;
    return std::string(kernels::precision_name(v.precision)) + (int8 ? "" : " ") +
           (int8 ? "" : kernels::pack_layout_name(v.layout));
  };
  const double gen_rss = gen_reset ? bench::peak_since_reset_mib() : -1;  // before the second triads
  const double rss = gen_reset ? std::max(build_rss, gen_rss) : bench::peak_rss_mib();
  const double triad = std::max(triad_before, bench::triad_gbs());
  const double stream = std::max(stream_before, bench::triad_gbs(10, stream_bytes));
  // Bytes read per new token: the weights (4 bytes each in fp32, 2 in bf16; int8: 1 for the
  // quantized weights, the small ones that stay fp32 ignored), plus K and V (f32) of every layer
  // at the mean cache length.
  const auto bytes_per_token = [&](const Variant& v) {
    const bool bf16 = v.precision == kernels::MatmulPrecision::bf16;
    const bool int8 = v.precision == kernels::MatmulPrecision::int8;
    const double wbytes = int8 ? 1.0 : bf16 ? 2.0 : 4.0;
    const double mean_len = double(kPrompt) + double(kNew - 1) / 2.0;
    return wbytes * double(b.model->num_parameters()) + 4.0 * 2.0 * double(cfg.n_layer) * double(cfg.n_embd) * mean_len;
  };
  for (size_t p = 0; p < variants.size(); ++p) {
    const double w = bench::median(timing[p].wall), c = bench::median(timing[p].cpu);
    const double bytes = bytes_per_token(variants[p]);
    const double floor_ms = bytes / (triad * 1e9) * 1e3;
    const double stream_floor_ms = bytes / (stream * 1e9) * 1e3;
    std::printf("%-5s %s d %lld, layers %lld, heads %lld, vocab %lld: %.3f ms/token (%.1f tokens/s) wall, "
                "%.3f ms/token CPU; checksum %lld\n",
                name.c_str(), label(variants[p]).c_str(), (long long)cfg.n_embd, (long long)cfg.n_layer,
                (long long)cfg.n_head, (long long)cfg.vocab_size, w / kNew, 1e3 * kNew / w, c / kNew,
                (long long)timing[p].checksum);
    std::printf("      bandwidth floor: %.1f MB per token / triad (64 MiB arrays) %.1f GB/s = %.3f ms/token; "
                "measured / floor %.2fx\n",
                bytes / 1e6, triad, floor_ms, (w / kNew) / floor_ms);
    std::printf("      STREAM-sized triad (%lld MiB arrays, 4x the %lld MiB last-level cache) %.1f GB/s: floor %.3f "
                "ms/token, measured / floor %.2fx\n",
                (long long)(stream_bytes >> 20), (long long)(bench::last_level_cache_bytes() >> 20), stream,
                stream_floor_ms, (w / kNew) / stream_floor_ms);
    std::printf("      peak RSS %.0f MiB (%s)", rss,
                gen_reset ? "model + generation: the mark reset after the first triads" : "whole process");
    if (gen_reset) std::printf("; during generation %.0f MiB", gen_rss);
    std::printf("\n");
  }
  // Paired floor: the machine's bandwidth drifts within minutes here (a triad read 32 GB/s in one
  // sitting and 55 in the next), so the ratio above, the median generation against the faster of
  // two triads, can compare a slow spell with a fast one. Here triads and generations alternate,
  // T0 G0 T1 G1 ... G(n-1) Tn, and each generation is held against the faster of its two
  // neighbouring triads: n ratios from one stretch of time each, reported as median and quartiles.
  // (After the peak RSS is read: the triad arrays are not the model's memory.)
  for (size_t p = 0; p < variants.size(); ++p) {
    o.precision = variants[p].precision;
    std::vector<double> ratios;
    double before = bench::triad_gbs(5, stream_bytes);
    std::string pairs = std::to_string(int(before + 0.5));  // triad GB/s, ms/token, triad GB/s, ...
    for (int r = 0; r < reps; ++r) {
      const double w0 = bench::now_ms();
      gens[size_t(variants[p].layout)]->generate_ids({prompt}, o);
      const double w = bench::now_ms() - w0, after = bench::triad_gbs(5, stream_bytes);
      ratios.push_back((w / kNew) / (bytes_per_token(variants[p]) / (std::max(before, after) * 1e9) * 1e3));
      char step[48];
      std::snprintf(step, sizeof step, ", %.2f, %.0f", w / kNew, after);
      pairs += step;
      before = after;
    }
    std::sort(ratios.begin(), ratios.end());
    const auto q = [&](double f) { return ratios[size_t(f * double(ratios.size() - 1) + 0.5)]; };
    std::printf("      %s paired with STREAM-sized triads (each generation against the faster of the triads just "
                "before and after it), %d pairs: measured / floor median %.2fx (q1 %.2f, q3 %.2f, best %.2f)\n",
                label(variants[p]).c_str(), reps, q(0.5), q(0.25), q(0.75), ratios.front());
    std::printf("      in order, triad GB/s, generation ms/token, triad, ...: %s\n", pairs.c_str());
  }
  for (size_t p = 1; p < variants.size(); ++p) {  // each against the first
    size_t same = 0;
    while (same < timing[0].tokens.size() && same < timing[p].tokens.size() &&
           timing[0].tokens[same] == timing[p].tokens[same])
      ++same;
    std::printf("      %s / %s: %.2fx wall, %.2fx CPU; the first %zu of %lld tokens agree\n",
                label(variants[p]).c_str(), label(variants[0]).c_str(),
                bench::median(timing[0].wall) / bench::median(timing[p].wall),
                bench::median(timing[0].cpu) / bench::median(timing[p].cpu), same, (long long)kNew);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  const std::string shapes = argc > 2 ? argv[2] : "cfg1,gpt2";
  const std::string prec = argc > 3 ? argv[3] : "fp32";
  const std::string layout = argc > 4 ? argv[4] : "auto";
  const std::vector<kernels::MatmulPrecision> precisions = bench::precision_list(prec);
  if (precisions.empty() || (layout != "auto" && layout != "rows" && layout != "panels" && layout != "both")) {
    std::fprintf(stderr, "precision must be a comma-separated list of fp32, bf16, int8 (or both), got '%s'; layout "
                 "auto, rows, panels or both, got '%s'\n", prec.c_str(), layout.c_str());
    return 2;
  }
  // fp32 in each layout asked for; bf16 and int8 once each (their products use oneDNN's converted
  // weights; int8's small weights, if any, the layout asked for).
  std::vector<Variant> variants;
  for (kernels::MatmulPrecision p : precisions) {
    if (layout == "auto") {
      variants.push_back({p, kernels::PackLayout::rows, true});
      continue;
    }
    if (p != kernels::MatmulPrecision::fp32) {
      variants.push_back({p, layout == "panels" ? kernels::PackLayout::panels : kernels::PackLayout::rows});
      continue;
    }
    if (layout != "panels") variants.push_back({p, kernels::PackLayout::rows});
    if (layout != "rows") variants.push_back({p, kernels::PackLayout::panels});
  }
  // bf16 or int8 alone: the weights held so, as the commands hold them (a half / a quarter of the
  // weight memory).
  const bool hold = precisions.size() == 1 && precisions[0] != kernels::MatmulPrecision::fp32;
  std::printf("bench_gpt_generate: batch 1, prompt %lld, %lld new tokens, greedy, %d reps (median), precision %s; "
              "CPU %s, oneDNN ISA %s\n", (long long)kPrompt, (long long)kNew, reps, prec.c_str(),
              kernels::dnnl_cpu_info().cpu_model.c_str(), kernels::dnnl_cpu_info().isa.c_str());
  if (shapes.find("cfg1") != std::string::npos) {
    models::GptConfig c;
    c.vocab_size = 8192, c.n_positions = 256, c.n_embd = 256, c.n_head = 4, c.n_layer = 4, c.n_inner = 1024;
    run("cfg1", c, reps, variants, hold);
  }
  if (shapes.find("gpt2") != std::string::npos) {
    models::GptConfig c;  // the defaults are GPT-2 124M
    c.n_inner = 3072;
    run("gpt2", c, reps, variants, hold);
  }
  return 0;
}
