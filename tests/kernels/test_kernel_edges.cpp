// Kernel edge cases from a bug hunt, each against what the operation means: a product over an empty
// batch summed into its output, BLAS's alpha = 0 rule in bf16, rounded operands ended out of order,
// and int8 rows too small for the float reciprocal of their scale.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "qkv/kernels/bf16.h"
#include "qkv/kernels/bf16_step_weights.h"
#include "qkv/kernels/gemm.h"
#include "qkv/kernels/int8.h"

namespace qkv {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A bf16 scope on oneDNN's native kernels, the process's setting restored after.
struct NativeBf16 {
  kernels::Bf16Products before = kernels::bf16_products();
  kernels::MatmulPrecisionScope scope{kernels::MatmulPrecision::bf16};
  NativeBf16() { kernels::set_bf16_products(kernels::Bf16Products::native); }
  ~NativeBf16() { kernels::set_bf16_products(before); }
};

bool bf16_native() { return kernels::dnnl_cpu_info().bf16_native(); }

}  // namespace

// x (0, 3, 4) @ y (4, 5) summed over its (empty) batch into out (3, 5), as a gradient is: zeros.
// The output was left as it was (a fresh gradient buffer's stale bytes).
TEST(KernelEdges, AnEmptyBatchSummedIntoItsOutputGivesZeros) {
  Tensor x = Tensor::empty({0, 3, 4}), y = Tensor::full({4, 5}, 1.0);
  Tensor out = Tensor::full({3, 5}, kNaN);
  kernels::batched_matmul(x, y, Shape{0}, out);
  for (int64_t i = 0; i < out.numel(); ++i) EXPECT_EQ(out.data<float>()[i], 0.f) << i;
}

// BLAS's rule (and qkv's fp32, fp32_fma and tile routes): with alpha = 0, A and B are not read, so a
// NaN or inf there does not reach C = beta C. oneDNN's bf16 product gave NaN.
TEST(KernelEdges, Bf16AlphaZeroReadsNeitherOperand) {
  if (!bf16_native()) GTEST_SKIP() << "no native bf16 kernel here";
  NativeBf16 bf16;
  const std::vector<float> A = {kNaN, 1, 2, 3}, B = {INFINITY, 1, 1, 1};
  for (float beta : {1.f, 0.f}) {
    std::vector<float> C = {1, 2, 3, 4};
    kernels::gemm(false, false, 2, 2, 2, 0.f, A.data(), 2, B.data(), 2, beta, C.data(), 2);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(C[size_t(i)], beta * float(i + 1)) << "beta " << beta << ", " << i;
  }
}

// An outer operand ended before the inner one: the inner's end put the dead outer back in the
// thread's list, and a later product of the same matrix read its stale copy (4 for 12).
TEST(KernelEdges, RoundedOperandsMayEndInAnyOrder) {
  if (!bf16_native()) GTEST_SKIP() << "no native bf16 kernel here";
  NativeBf16 bf16;
  const int64_t n = 4;
  std::vector<float> A(n * n, 1.f), A2(n * n, 2.f), B(n * n, 1.f), C(n * n);
  std::optional<kernels::Bf16RoundedOperand> outer, inner;
  outer.emplace(A.data(), n, n, n);
  inner.emplace(A2.data(), n, n, n);
  outer.reset();
  inner.reset();
  std::fill(A.begin(), A.end(), 3.f);  // changed after its copy ended
  kernels::gemm(false, false, n, n, n, 1.f, A.data(), n, B.data(), n, 0.f, C.data(), n);
  EXPECT_EQ(C[0], 3.f * float(n));
}

// Rows whose largest magnitude is below 127 / FLT_MAX (3.7e-37): 127 / amax overflowed to inf, the
// activations quantized to 0 (every output 0) and the weights through int8_t(inf), undefined. Now
// within the int8 scheme's bound of the exact product, as any other row.
TEST(KernelEdges, Int8RowsBelowTheReciprocalsRangeKeepTheirValues) {
  if (!kernels::int8_supported()) GTEST_SKIP() << "no int8 kernel here";
  const int64_t N = 3, K = 40;
  std::vector<float> w(N * K), x(2 * K);
  for (int64_t i = 0; i < N * K; ++i) w[size_t(i)] = float((i * 37) % 11) - 5.f;
  for (int64_t k = 0; k < K; ++k) w[size_t(2 * K + k)] *= 1e-39f;  // a denormal weight row
  for (int64_t k = 0; k < K; ++k) x[size_t(k)] = (float((k * 13) % 7) - 3.f) * 1e-37f, x[size_t(K + k)] = 1.f;
  for (auto pack : {kernels::pack_int8_weight, kernels::pack_int8_weight_rows}) {
    const auto packed = pack(w.data(), N, K, K);
    std::vector<float> out(2 * N);
    kernels::gemm_int8_packed(2, x.data(), K, *packed, nullptr, out.data(), N);
    for (int64_t m = 0; m < 2; ++m)
      for (int64_t j = 0; j < N; ++j) {
        double exact = 0, ax = 0, aw = 0;
        for (int64_t k = 0; k < K; ++k) {
          exact += double(x[size_t(m * K + k)]) * double(w[size_t(j * K + k)]);
          ax = std::max(ax, std::fabs(double(x[size_t(m * K + k)])));
          aw = std::max(aw, std::fabs(double(w[size_t(j * K + k)])));
        }
        // Rounding each operand to 1/254 of its row's largest magnitude, summed over K.
        const double bound = double(K) * (ax * aw / 254.0) * 2.0 + 1e-44;
        EXPECT_NEAR(double(out[size_t(m * N + j)]), exact, bound) << "row " << m << ", column " << j;
        if (std::fabs(exact) >= double(std::numeric_limits<float>::min())) {  // not 0 where float holds it
          EXPECT_NE(out[size_t(m * N + j)], 0.f) << "row " << m << ", column " << j << " (exact " << exact << ")";
        }
      }
  }
}

}  // namespace qkv
