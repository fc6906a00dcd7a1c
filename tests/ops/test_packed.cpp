// ops/packed.h: linear_packed (weights packed once, AVX-512 micro-kernel) against linear (BLAS).
#include "qkv/ops/packed.h"

#include <gtest/gtest.h>

#include <cmath>

#include "qkv/autograd/node.h"
#include "qkv/ops/matmul.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

TEST(LinearPacked, MatchesLinearForEveryTileShape) {
  NoGradGuard ng;
  // Rows 1..17 cover full and partial 8-row tiles; N covers full, partial and single panels.
  for (int64_t M : {1, 3, 8, 9, 17, 32}) {
    for (int64_t N : {1, 5, 16, 31, 32, 33, 70, 96}) {
      for (int64_t K : {1, 7, 64, 130}) {
        for (bool bias : {true, false}) {
          SCOPED_TRACE(::testing::Message() << "M " << M << " N " << N << " K " << K << " bias " << bias);
          Tensor x = randn({M, K}, uint64_t(M * 1000 + N * 10 + K)), w = randn({N, K}, uint64_t(N + 7 * K));
          Tensor b = bias ? randn({N}, uint64_t(N + 3)) : Tensor();
          auto p = kernels::pack_linear(w, b);
          // Reductions over K terms: the f32 tolerance scaled by sqrt(K) as in test_matmul.
          Tol tol{kF32.rtol, kF32.atol * std::sqrt(double(K))};
          EXPECT_CLOSE(linear_packed(x, p), linear(x, w, b), tol);
        }
      }
    }
  }
}

TEST(LinearPacked, LargeShapesTakeTheParallelPaths) {
  NoGradGuard ng;
  // N * K >= 2^18 packs the panels on the pool and M * N * K >= 2^22 multiplies on it, whatever
  // the wait policy (kernels/parallel.h); N = 1000 leaves a partial last panel to zero-pad.
  const int64_t M = 32, N = 1000, K = 300;
  Tensor x = randn({M, K}, 11), w = randn({N, K}, 12), b = randn({N}, 13);
  Tol tol{kF32.rtol, kF32.atol * std::sqrt(double(K))};
  EXPECT_CLOSE(linear_packed(x, kernels::pack_linear(w, b)), linear(x, w, b), tol);
}

TEST(LinearPacked, LeadingAxesStridedRowsAndF64) {
  NoGradGuard ng;
  Tensor w = randn({40, 24}, 1), b = randn({40}, 2);
  auto p = kernels::pack_linear(w, b);
  Tensor x = randn({3, 5, 24}, 3);  // (B, T, K) -> (B, T, N)
  EXPECT_CLOSE(linear_packed(x, p), linear(x, w, b), kF32);
  Tensor wide = randn({6, 48}, 4);  // rows with a stride of 48: a column slice
  Tensor xs = wide.as_strided({6, 24}, {48, 1}, 8);
  EXPECT_CLOSE(linear_packed(xs, p), linear(xs, w, b), kF32);
  Tensor w64 = randn({9, 5}, 5, DType::f64), x64 = randn({4, 5}, 6, DType::f64);
  EXPECT_CLOSE(linear_packed(x64, kernels::pack_linear(w64, Tensor())), linear(x64, w64), kF64);
  EXPECT_THROW(linear_packed(randn({2, 23}, 7), p), Error);  // K mismatch names the op
}
