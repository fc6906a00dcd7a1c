// Shared by the bf16 GEMM tests (test_gemm_bf16.cpp, test_bf16_tile.cpp): a product of
// bf16-rounded operands checked against its exact value within the f32 accumulation bound.
//
// Error bound. A and B are rounded to bf16 (8-bit significands), so every product a*b is exact in
// f32 (16 significant bits <= 24). What remains is the f32 accumulation of K exact products: for any
// summation order (oneDNN blocks K and may sum pairs first) the computed sum s^ of K terms satisfies
//   |s^ - s| <= gamma_{K-1} sum|a_k b_k|,  gamma_n = n u / (1 - n u),  u = 2^-24 (f32 unit roundoff),
// then alpha * s^ + beta * c0 adds at most two more roundings (the scale and the sum post-op), each
// <= u * |value|. The test checks |C - C_exact| <= (K + 2) u (1 + 1e-6) sum_k |alpha a_k b_k| + 2 u |beta c0|
// + 2 u |C_exact| with C_exact in double (its own error, ~2^-53, is negligible). AVX512_BF16's dot
// instruction flushes bf16 subnormals to zero, so the inputs here are normal numbers (the rounding
// test covers subnormals).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "qkv/kernels/bf16.h"

namespace qkv::bf16_test {

constexpr double kU32 = 1.0 / (1 << 24);  // f32 unit roundoff

inline float bf(float x) { return kernels::from_bf16(kernels::to_bf16(x)); }

// Checks C (M, N, row stride ldc) against the exact product of the rounded operands.
inline void check_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const std::vector<float>& A,
                       int64_t lda, const std::vector<float>& B, int64_t ldb, float beta, const std::vector<float>& C0,
                       const std::vector<float>& C, int64_t ldc) {
  int64_t bad = 0;
  double worst = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0, abs_s = 0;
      for (int64_t k = 0; k < K; ++k) {
        double a = bf(ta ? A[size_t(k * lda + i)] : A[size_t(i * lda + k)]);
        double b = bf(tb ? B[size_t(j * ldb + k)] : B[size_t(k * ldb + j)]);
        s += a * b;
        abs_s += std::fabs(a * b);
      }
      double c0 = C0[size_t(i * ldc + j)];
      double exact = alpha * s + beta * c0;
      double bound = (K + 2) * kU32 * (1 + 1e-6) * std::fabs(alpha) * abs_s + 2 * kU32 * std::fabs(beta * c0) +
                     2 * kU32 * std::fabs(exact);
      double err = std::fabs(C[size_t(i * ldc + j)] - exact);
      worst = std::max(worst, bound > 0 ? err / bound : err);
      if (err > bound && bad++ < 5)
        ADD_FAILURE() << "C[" << i << "," << j << "] = " << C[size_t(i * ldc + j)] << ", exact " << exact
                      << ", error " << err << " > bound " << bound;
    }
  EXPECT_EQ(bad, 0) << "of " << M * N << " (worst error / bound " << worst << ")";
}

}  // namespace qkv::bf16_test
