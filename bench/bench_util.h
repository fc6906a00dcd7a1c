// bench/bench_util.h - helpers shared by the benchmarks that time qkv against a PyTorch child
// process in the same run (bench_encoder_layer, bench_seq2seq_decode, ...): clocks (wall and
// process CPU time), medians, peak RSS, the source tree's path, and running a script while
// collecting its output.
#pragma once
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "qkv/kernels/bf16.h"
#include "qkv/util/buffer.h"
#include "qkv/models/transformer.h"

namespace qkv::bench {

// The source tree, as CMake configured it (not __FILE__: ccache with base_dir makes that relative).
inline std::string source_dir() { return QKV_SOURCE_DIR; }

inline double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// User + system CPU time of the process (all threads), ms.
inline double cpu_ms() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto ms = [](const timeval& t) { return double(t.tv_sec) * 1e3 + double(t.tv_usec) * 1e-3; };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

// Peak resident set size of this process so far, MiB.
inline double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// Resets the kernel's peak-RSS mark (VmHWM) to the current RSS (Linux: "5" into
// /proc/self/clear_refs), so that peak_since_reset_mib() measures one phase of a run (e.g. the
// model and its generation, not a triad's arrays before it). False if the kernel refused.
inline bool reset_peak_rss() {
  FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

// VmHWM of /proc/self/status (the peak RSS since the process started or since reset_peak_rss),
// MiB; -1 if it cannot be read.
inline double peak_since_reset_mib() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  double kib = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmHWM: %lf kB", &kib) == 1) break;
  std::fclose(f);
  return kib < 0 ? -1 : kib / 1024.0;
}

// The last-level cache of CPU 0 in bytes (sysconf), 0 if unknown.
inline int64_t last_level_cache_bytes() {
  for (int name : {_SC_LEVEL4_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long v = sysconf(name);
    if (v > 0) return int64_t(v);
  }
  return 0;
}

// STREAM-style triad a = b + s * c over three f32 arrays of `array_bytes` each (default 64 MiB),
// first-touched by the OpenMP threads that use them, on 2 MiB pages (buffer_alloc's kept buffers:
// the fastest pages this machine gives, so the floor is the lowest one): the best of `reps` passes
// after one warm-up, in GB/s of wall time (3 arrays moved per pass, as STREAM counts). The
// attainable memory bandwidth that a bandwidth-bound kernel is compared with, measured in the same
// sitting.
// STREAM's own rule is arrays of at least 4x the last-level cache: with a large L3 (260 MiB on
// the Emerald Rapids VM) 64 MiB arrays are served partly from the cache; pass
// stream_array_bytes() for the rule's size.
inline double triad_gbs(int reps = 10, int64_t array_bytes = 64ll << 20) {
  const int64_t kN = array_bytes / int64_t(sizeof(float));
  // buffer_alloc leaves the pages untouched until the threads' first writes place them.
  const size_t bytes = size_t(kN) * sizeof(float);
  const BufferDeleter release{bytes, BufferLife::kept};
  const auto array = [&] {
    return std::unique_ptr<float, BufferDeleter>(static_cast<float*>(buffer_alloc(bytes, BufferLife::kept)), release);
  };
  auto a = array(), b = array(), c = array();
  float *pa = a.get(), *pb = b.get(), *pc = c.get();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < kN; ++i) pa[i] = 0.f, pb[i] = 1.f, pc[i] = 2.f;
  const float s = 3.f;
  double best = 1e30;
  for (int r = 0; r <= reps; ++r) {
    const double t0 = now_ms();
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < kN; ++i) pa[i] = pb[i] + s * pc[i];
    if (r > 0) best = std::min(best, now_ms() - t0);  // pass 0 is the warm-up
  }
  if (pa[kN / 2] != 7.f) std::fprintf(stderr, "triad check failed\n");
  return 3.0 * double(kN * int64_t(sizeof(float))) / (best * 1e-3) / 1e9;
}

// STREAM's array size for this machine: 4x the last-level cache, at least 64 MiB.
inline int64_t stream_array_bytes() { return std::max<int64_t>(64ll << 20, 4 * last_level_cache_bytes()); }

inline double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Wall and process CPU time (all threads) of a run, seconds: on a shared machine CPU time is the
// fairer measure of work. CLOCK_PROCESS_CPUTIME_ID, precise enough for runs of microseconds.
struct Timed {
  double wall, cpu;
};
inline double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}
// Medians over `reps` runs of each function, run in alternation (a, b, ..., a, b, ...) after
// `warm` warm-up rounds, so that drifting machine speed (shared host, clock frequency) affects
// every side alike.
inline std::vector<Timed> timed_all(const std::vector<std::function<void()>>& fns, int reps, int warm = 2) {
  for (int i = 0; i < warm; ++i)
    for (const auto& f : fns) f();
  std::vector<std::vector<double>> wall(fns.size()), cpu(fns.size());
  for (int i = 0; i < reps; ++i)
    for (size_t j = 0; j < fns.size(); ++j) {
      const double w0 = now_ms() * 1e-3, c0 = process_cpu_seconds();
      fns[j]();
      wall[j].push_back(now_ms() * 1e-3 - w0);
      cpu[j].push_back(process_cpu_seconds() - c0);
    }
  std::vector<Timed> out;
  for (size_t j = 0; j < fns.size(); ++j) out.push_back({median(wall[j]), median(cpu[j])});
  return out;
}
inline Timed timed(const std::function<void()>& fn, int reps, int warm = 2) { return timed_all({fn}, reps, warm)[0]; }
inline std::pair<Timed, Timed> timed_pair(const std::function<void()>& fa, const std::function<void()>& fb, int reps,
                                          int warm = 2) {
  const std::vector<Timed> t = timed_all({fa, fb}, reps, warm);
  return {t[0], t[1]};
}

// OMP_NUM_THREADS, or `fallback` when unset.
inline int env_threads(int fallback = 2) {
  const char* omp = std::getenv("OMP_NUM_THREADS");
  return omp ? std::atoi(omp) : fallback;
}

// Runs `cmd` through the shell and returns its standard output ("" if it could not start).
inline std::string run_capture(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {};
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  pclose(p);
  return out;
}

// The shell command that runs a PyTorch script of the source tree (`script`, e.g.
// "tools/bench/seq2seq_torch.py") with `args`. The child inherits this process's environment, so
// both sides of a comparison run under the same OpenMP wait settings (OMP_WAIT_POLICY,
// GOMP_SPINCOUNT); when neither is set, the child gets OMP_WAIT_POLICY=PASSIVE, the setting
// ../shared/bench-reference/README.md gives for PyTorch.
inline std::string torch_command(const std::string& script, const std::string& args) {
  const bool policy_set = std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT");
  return std::string(policy_set ? "" : "OMP_WAIT_POLICY=PASSIVE ") + "/usr/bin/python3 -I " + source_dir() + "/" +
         script + " " + args;
}

// The number after `key` in text ("median_ms=12.5" with key "median_ms=", or a JSON line
// "\"key\": 12.5" with key "\"key\":"); -1 if absent.
inline double find_number(const std::string& text, const std::string& key) {
  auto k = text.find(key);
  return k == std::string::npos ? -1.0 : std::atof(text.c_str() + k + key.size());
}

// The Transformer of ../shared/bench-reference/seq2seq_bench.py: d_model 256, 4 heads, 3+3 post-LN
// layers, FFN 1024 (ReLU), one embedding table shared by source and target, a separate generator,
// dropout 0.1 everywhere nn.Transformer puts it (attention weights too). Decoding benches run it
// in eval mode, where dropout does nothing.
// A bench's precision argument: a comma-separated list of fp32, bf16, int8 ("both" = fp32,bf16),
// in the order given. Empty when any item is not a precision.
inline std::vector<kernels::MatmulPrecision> precision_list(const std::string& arg) {
  std::vector<kernels::MatmulPrecision> out;
  const std::string list = arg == "both" ? "fp32,bf16" : arg;
  try {
    for (size_t at = 0; at <= list.size();) {
      const size_t end = std::min(list.find(',', at), list.size());
      out.push_back(kernels::parse_precision(list.substr(at, end - at)));
      at = end + 1;
    }
  } catch (const std::exception&) {
    out.clear();
  }
  return out;
}

inline models::TransformerConfig reference_transformer_config(int64_t vocab) {
  models::TransformerConfig cfg;
  cfg.src_vocab = cfg.tgt_vocab = vocab;
  cfg.d_model = 256;
  cfg.heads = 4;
  cfg.enc_layers = cfg.dec_layers = 3;
  cfg.d_ff = 1024;
  cfg.dropout = 0.1;
  cfg.attention_dropout = 0.1;  // nn.Transformer's attention dropout is its `dropout`
  cfg.activation = "relu";
  cfg.pre_norm = false;
  cfg.shared_embeddings = true;
  cfg.tie_output = false;
  return cfg;
}

}  // namespace qkv::bench
