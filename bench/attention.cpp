// Fused vs naive scaled dot-product attention: forward+backward time and peak memory.
//
//   OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE build/bench/bench_attention [B H Dh]
//   ... build/bench/bench_attention tiles [B H T Dh]   (default 16 4 256 64: GPT cfg1, causal)
//
// tiles: the fused kernel's tile products on one thread, fp32 (kernels::gemm: OpenBLAS) against
// bf16 (kernels::gemm_bf16_tile, operands rounded per call as the kernel does), and the whole
// causal fused attention forward+backward under each matmul precision (the tiles follow it).
//
// Every (path, T) runs in its own child process (this binary with --one), so the peak RSS it
// reports (getrusage ru_maxrss) belongs to that configuration alone. Peak allocator bytes come
// from qkv::allocator_stats() (tensors only), counted above the inputs' bytes; kernel scratch
// (per-thread std::vector tiles; the naive backward's (Tq, Tk) per-thread buffer) shows in RSS.
#include <cblas.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "qkv/attention/sdpa.h"
#include "qkv/autograd/node.h"
#include "qkv/kernels/attention.h"
#include "qkv/kernels/bf16.h"
#include "qkv/kernels/gemm.h"
#include "qkv/tensor/storage.h"

using namespace qkv;
using Clock = std::chrono::steady_clock;

namespace {

Tensor randn(const Shape& s, uint64_t seed) {
  Generator g(seed);
  Tensor t = Tensor::empty(s);
  g.normal(t.data<float>(), t.numel());
  return t;
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// CPU time (user + system, all threads) of this process in ms: less sensitive than wall time to
// other processes on a shared machine.
double cpu_ms() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return (double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3) +
         double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-3;
}

// One configuration: prints "fwd_ms fwdbwd_ms fwdbwd_cpu_ms peak_alloc_bytes max_rss_kb".
int run_one(bool naive, int64_t B, int64_t H, int64_t T, int64_t Dh, bool causal) {
  Tensor q = randn({B, H, T, Dh}, 1), k = randn({B, H, T, Dh}, 2), v = randn({B, H, T, Dh}, 3);
  Tensor gy = randn({B, H, T, Dh}, 4);
  for (Tensor* t : {&q, &k, &v}) t->set_requires_grad(true);
  AttentionMask m;
  m.causal = causal;
  const int reps = T <= 512 ? 10 : (T <= 1024 ? 5 : 3);
  std::vector<double> fwd, both, cpu;
  size_t peak = 0;
  for (int r = 0; r <= reps; ++r) {  // r = 0 warms up
    for (Tensor* t : {&q, &k, &v}) t->zero_grad();
    const size_t base = allocator_stats().bytes_in_use;
    allocator_reset_peak();
    const double c0 = cpu_ms();
    auto t0 = Clock::now();
    SdpaResult res = scaled_dot_product_attention(q, k, v, m, 0.0, true, naive);
    double f = ms_since(t0);
    backward(res.out, gy);
    double fb = ms_since(t0), fbc = cpu_ms() - c0;
    peak = std::max(peak, allocator_stats().peak_bytes_in_use - base);
    if (r > 0) fwd.push_back(f), both.push_back(fb), cpu.push_back(fbc);
  }
  std::sort(fwd.begin(), fwd.end());
  std::sort(both.begin(), both.end());
  std::sort(cpu.begin(), cpu.end());
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("%.3f %.3f %.3f %zu %ld\n", fwd[fwd.size() / 2], both[both.size() / 2], cpu[cpu.size() / 2], peak,
              ru.ru_maxrss);
  return 0;
}

// Median microseconds of f() over `reps` calls after one warm-up call, in 9 rounds.
template <typename F>
double median_us(F f, int reps) {
  f();
  std::vector<double> t;
  for (int r = 0; r < 9; ++r) {
    auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) f();
    t.push_back(ms_since(t0) * 1e3 / reps);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int run_tiles(int64_t B, int64_t H, int64_t T, int64_t Dh) {
  kernels::check_precision_supported(kernels::MatmulPrecision::bf16, "bench_attention tiles");
  std::printf("# tile products, one thread, us per product (GF/s): fp32 GEMM; each bf16 kernel this CPU has "
              "(gemm_bf16_tile takes %s)\n",
              kernels::bf16_tile_kernel_name(kernels::bf16_tile_kernel()));
  const int64_t bq = kernels::kAttnBlockQ, bk = kernels::kAttnBlockK;
  struct Case {
    const char* name;
    bool ta, tb;
    int64_t M, N, K;
  };
  const Case cases[] = {{"S = Q K^T", false, true, bq, bk, Dh},   {"acc += P V", false, false, bq, Dh, bk},
                        {"dV += P^T dO", true, false, bk, Dh, bq}, {"dP = dO V^T", false, true, bq, bk, Dh},
                        {"dK += dS^T Q", true, false, bk, Dh, bq}, {"dQ += dS K", false, false, bq, Dh, bk}};
  Tensor a = randn({256, 256}, 5), b = randn({256, 256}, 6), c = Tensor::zeros({256, 256});
  const float *ap = a.data<float>(), *bp = b.data<float>();
  float* cp = c.data<float>();
  const kernels::MatmulPrecisionScope fp32(kernels::MatmulPrecision::fp32);
  const int blas_threads = openblas_get_num_threads();
  openblas_set_num_threads(1);  // as inside the kernels' parallel regions (else OpenBLAS splits a tile)
  using kernels::Bf16TileKernel;
  for (const Case& k : cases) {
    const int64_t lda = k.ta ? k.M : k.K, ldb = k.tb ? k.K : k.N;
    const double gf = 2.0 * k.M * k.N * k.K * 1e-3;
    const double t32 = median_us([&] { kernels::gemm(k.ta, k.tb, k.M, k.N, k.K, 1.f, ap, lda, bp, ldb, 1.f, cp, k.N); },
                                 200);
    std::printf("%-14s %4lld x %4lld x %4lld  fp32 %6.2f (%4.0f)", k.name, (long long)k.M, (long long)k.N,
                (long long)k.K, t32, gf / t32);
    for (Bf16TileKernel kern : {Bf16TileKernel::amx, Bf16TileKernel::avx512_bf16, Bf16TileKernel::fp32_fma}) {
      if (!kernels::bf16_tile_kernel_available(kern)) continue;
      const double t16 = median_us([&] {
        kernels::gemm_bf16_tile_with(kern, k.ta, k.tb, k.M, k.N, k.K, 1.f, ap, lda, bp, ldb, 1.f, cp, k.N);
      }, 200);
      std::printf("  %s %6.2f (%4.0f)", kernels::bf16_tile_kernel_name(kern), t16, gf / t16);
    }
    std::printf("\n");
  }
  openblas_set_num_threads(blas_threads);
  Tensor q = randn({B, H, T, Dh}, 1), kk = randn({B, H, T, Dh}, 2), v = randn({B, H, T, Dh}, 3);
  Tensor gy = randn({B, H, T, Dh}, 4);
  for (Tensor* t : {&q, &kk, &v}) t->set_requires_grad(true);
  AttentionMask m;
  m.causal = true;
  for (auto prec : {kernels::MatmulPrecision::fp32, kernels::MatmulPrecision::bf16}) {
    const kernels::MatmulPrecisionScope scope(prec);
    const double us = median_us([&] {
      SdpaResult res = scaled_dot_product_attention(q, kk, v, m);
      backward(res.out, gy);
    }, 5);
    std::printf("fused causal attention fwd+bwd, B %lld H %lld T %lld Dh %lld, %s tiles: %.2f ms\n", (long long)B,
                (long long)H, (long long)T, (long long)Dh, kernels::precision_name(prec), us * 1e-3);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 8 && std::strcmp(argv[1], "--one") == 0)
    return run_one(std::strcmp(argv[2], "naive") == 0, std::atoll(argv[3]), std::atoll(argv[4]), std::atoll(argv[5]),
                   std::atoll(argv[6]), std::atoi(argv[7]) != 0);
  if (argc > 1 && std::strcmp(argv[1], "tiles") == 0)
    return run_tiles(argc > 2 ? std::atoll(argv[2]) : 16, argc > 3 ? std::atoll(argv[3]) : 4,
                     argc > 4 ? std::atoll(argv[4]) : 256, argc > 5 ? std::atoll(argv[5]) : 64);
  const int64_t B = argc > 1 ? std::atoll(argv[1]) : 2, H = argc > 2 ? std::atoll(argv[2]) : 8;
  const int64_t Dh = argc > 3 ? std::atoll(argv[3]) : 64;
  const char* thr = std::getenv("OMP_NUM_THREADS");
  std::printf("# scaled_dot_product_attention f32, B %lld H %lld Dh %lld, OMP_NUM_THREADS=%s; median ms\n",
              (long long)B, (long long)H, (long long)Dh, thr ? thr : "(unset)");
  std::printf("# OpenBLAS core: %s%s\n", kernels::blas_core(),
              kernels::blas_core_is_degraded() ? " (DEGRADED: SSE3 kernels on an AVX-512 CPU; export "
                                                 "OPENBLAS_CORETYPE=SkylakeX)" : "");
  std::printf("# peak alloc = allocator peak above the inputs (tensors); RSS = child's max resident set\n");
  std::printf("# cpu = user+sys time of fwd+bwd summed over threads\n");
  std::printf("%-6s %-7s %5s %10s %12s %16s %14s %10s\n", "mask", "path", "T", "fwd_ms", "fwd+bwd_ms", "fwd+bwd_cpu_ms",
              "peak_alloc_MiB", "RSS_MiB");
  char self[4096] = {0};
  if (readlink("/proc/self/exe", self, sizeof(self) - 1) <= 0) return 1;
  for (int causal = 0; causal < 2; ++causal)
    for (int64_t T : {128, 512, 1024, 2048})
      for (const char* path : {"fused", "naive"}) {
        std::string cmd = std::string(self) + " --one " + path + " " + std::to_string(B) + " " +
                          std::to_string(H) + " " + std::to_string(T) + " " + std::to_string(Dh) + " " +
                          std::to_string(causal);
        FILE* p = popen(cmd.c_str(), "r");
        double f = 0, fb = 0, fbc = 0;
        size_t peak = 0;
        long rss = 0;
        int got = p ? std::fscanf(p, "%lf %lf %lf %zu %ld", &f, &fb, &fbc, &peak, &rss) : 0;
        if (p) pclose(p);
        if (got != 5) {
          std::printf("%-6s %-7s %5lld  (child failed)\n", causal ? "causal" : "none", path, (long long)T);
          continue;
        }
        std::printf("%-6s %-7s %5lld %10.2f %12.2f %16.2f %14.1f %10.1f\n", causal ? "causal" : "none", path,
                    (long long)T, f, fb, fbc, double(peak) / 1048576.0, double(rss) / 1024.0);
        std::fflush(stdout);
      }
  return 0;
}
