// bench_seq2seq_decode: greedy and beam-search decoding speed of models::Transformer against
// torch.nn.Transformer, in the same run (issue #5). qkv is timed through tasks::Translator
// (translate_ids: the batching and search every front end runs), on ids, without tokenizers.
//
// Model (both sides): d_model 256, 4 heads, 3 encoder + 3 decoder layers, d_ff 1024, ReLU,
// post-LN, shared source/target embedding (vocab 8000) * sqrt(d) + sinusoidal positions, separate
// output Linear(256, 8000), eval mode, f32, random weights. Batch 32 random source sentences of
// 32 tokens (no padding); every sentence decodes exactly 32 target tokens: the limit is set to 32
// (max_len_ratio 0, max_len_extra 32) and </s> is an ordinary token (TranslateOptions::ignore_eos),
// so nothing stops early. Timed: encoder + 32 decoder steps + search (Translator::translate_ids
// over decode::greedy / decode::beam_search, one batch of 32), as
// the shared reference's greedy() (../shared/bench-reference/seq2seq_bench.py, run through
// tools/bench/seq2seq_torch.py, which adds CPU time), which re-runs its decoder over the whole
// prefix every step (nn.Transformer has no cache). Beam search: beam 4, 32 sentences -> 128 rows.
//
// Rounds alternate qkv and the torch script (a child process, same environment, torch threads =
// OMP_NUM_THREADS) so both see the same machine load. Per round: the median of `reps` timed
// repetitions after one warm-up. Reported: sentences/s from wall time and from process CPU time
// (sentences / (CPU s / threads): the rate with the cores to ourselves, the figure to compare on
// a shared machine), and peak RSS (qkv: this process after greedy, then after beam; torch: its
// process).
//
// Run: OMP_NUM_THREADS=2 GOMP_SPINCOUNT=5000
//        build/bench/bench_seq2seq_decode [rounds=3] [reps=5] [torch=2] [modes=both] [precision=fp32]
// OPENBLAS_CORETYPE=SkylakeX belongs in that line on an AVX-512 CPU only (README, "Threads").
// GOMP_SPINCOUNT=5000 is qkv's own default wait policy (util/blas_env.h); the torch child
// inherits the same environment (bench::torch_command), and a short spin is faster for it too
// than OMP_WAIT_POLICY=PASSIVE here. OMP_WAIT_POLICY=PASSIVE instead runs both sides passive.
// torch: 2 = greedy and beam (torch beam runs 1 repetition per round: without a cache it is
// slow), 1 = greedy only, 0 = qkv only (for profiling); modes: both | greedy | beam;
// precision: a comma-separated list of fp32, bf16, int8, or both = fp32,bf16
// (TranslateOptions::precision; several alternate within every round, and each is reported
// against fp32: the speed-up, ms per decoding step and how many tokens it changed).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.h"
#include "qkv/kernels/bf16.h"
#include "qkv/models/transformer.h"
#include "qkv/tasks/translator.h"
#include "qkv/tensor/rng.h"

using namespace qkv;

namespace {

constexpr int64_t kVocab = 8000, kBatch = 32, kSrcLen = 32, kSteps = 32;

struct Measure {
  std::vector<double> wall_s, cpu_s;  // per-round medians, seconds per batch
  double rss_mib = -1;
};

// Median {wall, cpu} seconds of `reps` decodes of the batch (after one warm-up); checksum of tokens.
std::pair<double, double> time_qkv(const tasks::Translator& translator, const std::vector<std::vector<int64_t>>& src,
                                   int beam, int reps, int64_t& checksum, kernels::MatmulPrecision precision,
                                   std::vector<int64_t>* tokens) {
  tasks::TranslateOptions o;
  o.precision = precision;
  o.search.beam = beam;
  o.search.nbest = 1;
  o.search.max_len_ratio = 0;
  o.search.max_len_extra = kSteps;
  o.batch_size = kBatch;
  o.ignore_eos = true;  // no token ends a hypothesis
  std::vector<double> wall, cpu;
  for (int r = 0; r <= reps; ++r) {
    double c0 = bench::cpu_ms(), t0 = bench::now_ms();
    auto hyps = translator.translate_ids(src, o);
    double t1 = bench::now_ms(), c1 = bench::cpu_ms();
    checksum = 0;
    if (tokens) tokens->clear();
    for (auto& h : hyps) {
      if (h.at(0).tokens.size() != size_t(kSteps)) {
        std::fprintf(stderr, "expected %lld tokens, got %zu\n", (long long)kSteps, h[0].tokens.size());
        std::exit(1);
      }
      for (int64_t t : h[0].tokens) checksum = checksum * 31 + t;
      if (tokens) tokens->insert(tokens->end(), h[0].tokens.begin(), h[0].tokens.end());
    }
    if (r > 0) {
      wall.push_back((t1 - t0) * 1e-3);
      cpu.push_back((c1 - c0) * 1e-3);
    }
  }
  return {bench::median(wall), bench::median(cpu)};
}

// Runs tools/bench/seq2seq_torch.py decode; {wall s, cpu s, peak RSS MiB} medians (-1 if it failed).
std::vector<double> time_torch(int beam, int reps, int threads) {
  std::string out = bench::run_capture(bench::torch_command("tools/bench/seq2seq_torch.py",
                                                          "decode --threads " + std::to_string(threads) + " --beam " +
                                                              std::to_string(beam) + " --reps " + std::to_string(reps)));
  return {bench::find_number(out, "\"wall_s_median\":"), bench::find_number(out, "\"cpu_s_median\":"),
          bench::find_number(out, "\"peak_rss_MiB\":")};
}

void report(const char* what, const Measure& q, const Measure& t, int threads) {
  auto sps = [](double s) { return s > 0 ? double(kBatch) / s : -1.0; };
  double qw = sps(bench::median(q.wall_s)), qc = sps(bench::median(q.cpu_s) / threads);
  std::printf("| %-15s | qkv wall %8.1f sent/s %6.2f ms/step | qkv cpu %8.1f sent/s | qkv RSS %6.1f MiB |", what, qw,
              bench::median(q.wall_s) * 1e3 / double(kSteps), qc, q.rss_mib);
  if (t.wall_s.empty()) {
    std::printf(" torch not run |\n");
    return;
  }
  double tw = sps(bench::median(t.wall_s)), tc = sps(bench::median(t.cpu_s) / threads);
  std::printf(" torch wall %6.1f sent/s | torch cpu %6.1f sent/s | torch RSS %6.1f MiB | qkv/torch wall %.1fx cpu %.1fx |\n",
              tw, tc, t.rss_mib, qw / tw, qc / tc);
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  const int torch = argc > 3 ? std::atoi(argv[3]) : 2;
  const std::string modes = argc > 4 ? argv[4] : "both";
  const bool run_greedy = modes != "beam", run_beam = modes != "greedy";
  const std::string prec = argc > 5 ? argv[5] : "fp32";
  const std::vector<kernels::MatmulPrecision> precisions = bench::precision_list(prec);  // timed in this order
  if (precisions.empty()) {
    std::fprintf(stderr, "precision must be a comma-separated list of fp32, bf16, int8 (or both), got '%s'\n",
                 prec.c_str());
    return 2;
  }
  const int threads = bench::env_threads();

  const models::TransformerConfig cfg = bench::reference_transformer_config(kVocab);
  Generator gen(0);
  io::Seq2SeqBundle bundle;  // the model only: the bench feeds ids
  bundle.config = {{"model_type", "transformer"}, {"model", cfg}};
  bundle.model = std::make_shared<models::Transformer>(cfg, gen);
  bundle.model->eval();
  const tasks::Translator translator(bundle);

  std::vector<std::vector<int64_t>> src(kBatch, std::vector<int64_t>(kSrcLen));  // (B, S) ids in [3, V), no padding
  for (auto& sentence : src)
    for (auto& id : sentence) id = 3 + int64_t(gen.randint(kVocab - 3));

  std::printf("seq2seq decode: d 256 h 4 3+3 layers ff 1024 vocab 8000, batch %lld src %lld, %lld steps, %d threads, "
              "%d rounds x %d reps\n",
              (long long)kBatch, (long long)kSrcLen, (long long)kSteps, threads, rounds, reps);
  std::printf("precision: %s; CPU %s; oneDNN ISA %s\n", prec.c_str(), kernels::dnnl_cpu_info().cpu_model.c_str(),
              kernels::dnnl_cpu_info().isa.c_str());
  // Per precision (index: MatmulPrecision): timings, checksums and the tokens of the last repetition.
  Measure qg[3], qb[3], tg, tb;
  int64_t sum_g[3] = {0, 0, 0}, sum_b[3] = {0, 0, 0};
  std::vector<int64_t> tok_g[3], tok_b[3];
  auto idx = [](kernels::MatmulPrecision p) { return int(p); };
  for (int r = 0; r < rounds && run_greedy; ++r) {
    for (auto p : precisions) {
      const int i = idx(p);
      auto [gw, gc] = time_qkv(translator, src, 1, reps, sum_g[i], p, &tok_g[i]);
      qg[i].wall_s.push_back(gw);
      qg[i].cpu_s.push_back(gc);
      qg[i].rss_mib = bench::peak_rss_mib();
      std::printf("round %d greedy %s: qkv wall %.3f s cpu %.3f s\n", r, kernels::precision_name(p), gw, gc);
    }
    std::vector<double> t{-1, -1, -1};
    if (torch >= 1) t = time_torch(1, reps, threads);
    if (t[0] > 0) {
      tg.wall_s.push_back(t[0]);
      tg.cpu_s.push_back(t[1]);
      tg.rss_mib = t[2];
      std::printf("round %d greedy torch: wall %.3f s cpu %.3f s\n", r, t[0], t[1]);
    }
    std::fflush(stdout);
  }
  for (int r = 0; r < rounds && run_beam; ++r) {
    for (auto p : precisions) {
      const int i = idx(p);
      auto [bw, bc] = time_qkv(translator, src, 4, reps, sum_b[i], p, &tok_b[i]);
      qb[i].wall_s.push_back(bw);
      qb[i].cpu_s.push_back(bc);
      qb[i].rss_mib = bench::peak_rss_mib();
      std::printf("round %d beam 4 %s: qkv wall %.3f s cpu %.3f s\n", r, kernels::precision_name(p), bw, bc);
    }
    std::vector<double> t{-1, -1, -1};
    if (torch >= 2) {
      t = time_torch(4, 1, threads);  // no cache: 4x the rows over the whole prefix, slow
      if (t[0] > 0) {
        tb.wall_s.push_back(t[0]);
        tb.cpu_s.push_back(t[1]);
        tb.rss_mib = t[2];
        std::printf("round %d beam 4 torch: wall %.3f s cpu %.3f s\n", r, t[0], t[1]);
      }
    }
    std::fflush(stdout);
  }
  for (auto p : precisions) {
    const int i = idx(p);
    std::printf("token checksums (%s): greedy %lld beam %lld\n", kernels::precision_name(p), (long long)sum_g[i],
                (long long)sum_b[i]);
  }
  for (auto p : precisions) {
    const int i = idx(p);
    const std::string name = std::string(kernels::precision_name(p));
    report(("greedy " + name).c_str(), qg[i], tg, threads);
    report(("beam 4 " + name).c_str(), qb[i], tb, threads);
  }
  for (auto p : precisions) {  // every other precision against fp32, when fp32 ran
    if (p == kernels::MatmulPrecision::fp32 ||
        std::find(precisions.begin(), precisions.end(), kernels::MatmulPrecision::fp32) == precisions.end())
      continue;
    const int i = idx(p);
    const char* name = kernels::precision_name(p);
    auto same = [](const std::vector<int64_t>& a, const std::vector<int64_t>& b) {  // equal tokens, equal sentences
      int64_t tok = 0, sent = 0;
      for (size_t s0 = 0; s0 + kSteps <= a.size() && s0 + kSteps <= b.size(); s0 += size_t(kSteps)) {
        int64_t k = 0;
        while (k < kSteps && a[s0 + size_t(k)] == b[s0 + size_t(k)]) ++k;
        tok += k, sent += k == kSteps;
      }
      return std::pair<int64_t, int64_t>(tok, sent);
    };
    auto ratio = [](const Measure& f, const Measure& b) { return bench::median(f.wall_s) / bench::median(b.wall_s); };
    auto cratio = [](const Measure& f, const Measure& b) { return bench::median(f.cpu_s) / bench::median(b.cpu_s); };
    auto [gt, gs] = same(tok_g[0], tok_g[i]);
    auto [bt, bs] = same(tok_b[0], tok_b[i]);
    if (run_greedy)
      std::printf("%s / fp32 greedy: %.2fx wall, %.2fx cpu; tokens before the first difference %lld of %lld, "
                  "sentences identical %lld of %lld\n", name, ratio(qg[0], qg[i]), cratio(qg[0], qg[i]), (long long)gt,
                  (long long)(kBatch * kSteps), (long long)gs, (long long)kBatch);
    if (run_beam)
      std::printf("%s / fp32 beam 4: %.2fx wall, %.2fx cpu; tokens before the first difference %lld of %lld, "
                  "sentences identical %lld of %lld\n", name, ratio(qb[0], qb[i]), cratio(qb[0], qb[i]), (long long)bt,
                  (long long)(kBatch * kSteps), (long long)bs, (long long)kBatch);
  }
  return 0;
}
