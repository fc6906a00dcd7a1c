// Bf16StepWeights::adopt (kernels/bf16_step_weights.h): a matrix made during a training step from
// its weights (a fused attention projection's [W_q; W_k; W_v]) is taken as one of the step's
// weights, so its products run on one blocked copy per role within the bf16 bound; without an
// active scope adopting does nothing; what is not a contiguous f32 matrix is refused by name.
#include <gtest/gtest.h>

#include <vector>

#include "bf16_bound.h"
#include "helpers.h"
#include "packed_product.h"
#include "qkv/kernels/bf16.h"
#include "qkv/kernels/bf16_step_weights.h"
#include "qkv/kernels/gemm.h"

namespace qkv {
namespace {

using testing::values;
using bf16_test::check_gemm;
using kernels::Bf16Products;
using kernels::MatmulPrecision;

TEST(Bf16StepWeights, AdoptedMatrixRunsOnOneCopyPerRole) {
  if (!kernels::dnnl_cpu_info().bf16_native())
    GTEST_SKIP() << "oneDNN has no bf16 kernel here (" << kernels::dnnl_cpu_info().isa << ")";
  const kernels::Bf16ProductsScope native(Bf16Products::native);
  const int64_t M = 53, N = 72, K = 24;  // N: three (24, 24) projections stacked
  Tensor param = testing::randn(Shape{K, K}, 81), fused = testing::randn(Shape{N, K}, 82);
  Tensor x = testing::randn(Shape{M, K}, 83), dy = testing::randn(Shape{M, N}, 84);
  const kernels::MatmulPrecisionScope bf16(MatmulPrecision::bf16);
  kernels::Bf16StepWeights::adopt(fused);  // no scope yet: nothing to join
  {
    kernels::Bf16StepWeights copies({param});
    Tensor y = Tensor::empty(Shape{M, N});
    kernels::linear(x, fused, Tensor(), y);  // not yet adopted: rounded per call
    EXPECT_EQ(copies.copies_made(), 0);
    kernels::Bf16StepWeights::adopt(fused);
    for (int round = 0; round < 2; ++round) {
      Tensor y2 = Tensor::empty(Shape{M, N}), dx = Tensor::empty(Shape{M, K});
      kernels::linear(x, fused, Tensor(), y2);  // x @ W^T
      check_gemm(false, true, M, N, K, 1.f, values(x), K, values(fused), K, 0.f, std::vector<float>(size_t(M * N)),
                 values(y2), N);
      kernels::matmul_2d(dy, fused, dx);  // dY @ W
      check_gemm(false, false, M, K, N, 1.f, values(dy), N, values(fused), K, 0.f, std::vector<float>(size_t(M * K)),
                 values(dx), K);
      EXPECT_EQ(copies.copies_made(), 2);  // one per role, however many products
    }
  }
  const std::string m = testing::error_of([&] { kernels::Bf16StepWeights::adopt(fused.as_strided(Shape{K, N}, Shape{1, K}, 0)); });
  EXPECT_MENTIONS(m, "Bf16StepWeights::adopt");
  EXPECT_MENTIONS(m, "contiguous f32");
}

}  // namespace
}  // namespace qkv
