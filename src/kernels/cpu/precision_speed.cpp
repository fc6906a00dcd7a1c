#include "qkv/kernels/precision_speed.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "qkv/kernels/bf16.h"
#include "qkv/kernels/gemm.h"

namespace qkv::kernels {
namespace {

double product_gflops(MatmulPrecision p) {
  constexpr int64_t M = 512, N = 1024, K = 1024;  // a batch of 512 tokens through a 1024-wide layer
  std::vector<float> a(size_t(M * K)), b(size_t(N * K)), c(size_t(M * N));
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(int(i % 17) - 8) / 8.f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(int(i % 13) - 6) / 6.f;
  const MatmulPrecisionScope fp32(MatmulPrecision::fp32);  // the caller's (bf16, say) is not the one measured
  double best = 1e30;
  for (int rep = 0; rep < 6; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    if (p == MatmulPrecision::bf16)  // oneDNN's own bf16 kernel, whatever bf16_products() says
      gemm_bf16_rounded(Bf16Products::native, false, true, M, N, K, 1.f, a.data(), K, b.data(), K, 0.f, c.data(), N);
    else
      gemm(false, true, M, N, K, 1.f, a.data(), K, b.data(), K, 0.f, c.data(), N);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) best = std::min(best, s);  // rep 0 warms up (and creates oneDNN's primitive)
  }
  return 2.0 * double(M) * double(N) * double(K) / best / 1e9;
}

}  // namespace

const PrecisionSpeed& measured_precision_speed() {
  static const PrecisionSpeed speed = [] {
    PrecisionSpeed s;
    s.fp32_gflops = product_gflops(MatmulPrecision::fp32);
    if (dnnl_cpu_info().bf16_native()) s.bf16_gflops = product_gflops(MatmulPrecision::bf16);
    return s;
  }();
  return speed;
}

}  // namespace qkv::kernels
