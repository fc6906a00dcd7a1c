// gemm_bf16_tile (kernels/bf16.h), the fused attention's bf16 tile products, through every kernel
// the build and CPU have, against the exact product of the rounded operands (bf16_bound.h).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "bf16_bound.h"
#include "helpers.h"
#include "qkv/kernels/bf16.h"
#include "qkv/util/error.h"

namespace qkv {
namespace {

using bf16_test::check_gemm;
using kernels::Bf16Products;
using kernels::Bf16TileKernel;
using testing::randn_values;

// gemm_bf16_tile, the attention tiles' products (one thread, no oneDNN): every kernel the build and
// CPU have (AMX tiles, qkv's vdpbf16ps kernel, the fp32 GEMM on rounded values), every transpose,
// the tile shapes and ragged ones around the kernels' blocks (AMX: 16 x 16 tiles, 32 values of K
// per tile, 2 x 2 tiles per block; vdpbf16ps: 8 x 32 micro-tiles of 16-column vectors), odd K (a
// zero-padded pair), beta 0 and 1; padding columns of C untouched.
TEST(Bf16Tile, ShapeClassesWithinTheF32AccumulationBound) {
  for (Bf16TileKernel kernel : {Bf16TileKernel::amx, Bf16TileKernel::avx512_bf16, Bf16TileKernel::fp32_fma}) {
    if (!kernels::bf16_tile_kernel_available(kernel)) {
      std::printf("gemm_bf16_tile: no %s kernel in this build or on this CPU: not checked\n",
                  kernels::bf16_tile_kernel_name(kernel));
      continue;
    }
    uint64_t seed = 500;
    for (auto [ta, tb] : {std::pair{false, false}, {false, true}, {true, false}, {true, true}})
      for (auto [M, N, K, pad] : {std::array<int64_t, 4>{7, 5, 3, 0}, {64, 128, 64, 0}, {128, 64, 64, 0},
                                  {64, 64, 128, 0}, {63, 127, 65, 1}, {37, 29, 131, 3}, {9, 33, 17, 2},
                                  {1, 40, 31, 0}, {17, 1, 64, 0}, {48, 80, 96, 0}, {33, 47, 33, 1}}) {
        SCOPED_TRACE(::testing::Message() << kernels::bf16_tile_kernel_name(kernel) << " " << (ta ? "t" : "n")
                                          << (tb ? "t" : "n") << " M " << M << " N " << N << " K " << K);
        for (float beta : {0.f, 1.f}) {
          const int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
          auto A = randn_values((ta ? K : M) * lda, seed), B = randn_values((tb ? N : K) * ldb, seed + 1, 0.5f);
          auto C0 = randn_values(M * ldc, seed + 2);
          seed += 3;
          auto C = C0;
          kernels::gemm_bf16_tile_with(kernel, ta, tb, M, N, K, 0.125f, A.data(), lda, B.data(), ldb, beta, C.data(),
                                       ldc);
          check_gemm(ta, tb, M, N, K, 0.125f, A, lda, B, ldb, beta, C0, C, ldc);
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = N; j < ldc; ++j) ASSERT_EQ(C[size_t(i * ldc + j)], C0[size_t(i * ldc + j)]);
        }
      }
  }
}

// Which kernel gemm_bf16_tile takes: a bf16 one under native products where there is one (AMX
// before vdpbf16ps), the fp32 GEMM under fp32_fma.
TEST(Bf16Tile, KernelFollowsTheProcessChoice) {
  const Bf16Products saved = kernels::bf16_products();
  kernels::set_bf16_products(Bf16Products::fp32_fma);
  EXPECT_EQ(kernels::bf16_tile_kernel(), Bf16TileKernel::fp32_fma);
  EXPECT_FALSE(kernels::bf16_tile_native());
  kernels::set_bf16_products(Bf16Products::native);
  Bf16TileKernel want = Bf16TileKernel::fp32_fma;  // the first available of AMX, vdpbf16ps, fp32_fma
  if (kernels::bf16_tile_kernel_available(Bf16TileKernel::avx512_bf16)) want = Bf16TileKernel::avx512_bf16;
  if (kernels::bf16_tile_kernel_available(Bf16TileKernel::amx)) want = Bf16TileKernel::amx;
  EXPECT_EQ(kernels::bf16_tile_kernel(), want);
  kernels::set_bf16_products(saved);
  for (Bf16TileKernel kernel : {Bf16TileKernel::amx, Bf16TileKernel::avx512_bf16})
    if (!kernels::bf16_tile_kernel_available(kernel)) {
      std::vector<float> C(4);
      EXPECT_THROW(kernels::gemm_bf16_tile_with(kernel, false, false, 2, 2, 2, 1.f, C.data(), 2, C.data(), 2, 0.f,
                                                C.data(), 2),
                   Error);
    }
}

// NaN and infinity reach the results as in fp32, through every kernel; beta outside {0, 1} is refused.
TEST(Bf16Tile, NonFiniteOperandsAndBadBeta) {
  const int64_t M = 9, N = 20, K = 7;
  auto A = randn_values(M * K, 1), B = randn_values(K * N, 2);
  A[size_t(2 * K + 3)] = NAN;       // row 2 of C: NaN
  A[size_t(5 * K + 1)] = INFINITY;  // row 5: +-inf (B has no zeros)
  for (Bf16TileKernel kernel : {Bf16TileKernel::amx, Bf16TileKernel::avx512_bf16, Bf16TileKernel::fp32_fma}) {
    if (!kernels::bf16_tile_kernel_available(kernel)) continue;
    SCOPED_TRACE(kernels::bf16_tile_kernel_name(kernel));
    std::vector<float> C(size_t(M * N), 0.f);
    kernels::gemm_bf16_tile_with(kernel, false, false, M, N, K, 1.f, A.data(), K, B.data(), N, 0.f, C.data(), N);
    for (int64_t j = 0; j < N; ++j) {
      EXPECT_TRUE(std::isnan(C[size_t(2 * N + j)])) << j;
      EXPECT_TRUE(std::isinf(C[size_t(5 * N + j)])) << j;
      EXPECT_TRUE(std::isfinite(C[size_t(4 * N + j)])) << j;
    }
  }
  std::vector<float> C(size_t(M * N), 0.f);
  EXPECT_THROW(kernels::gemm_bf16_tile(false, false, M, N, K, 1.f, A.data(), K, B.data(), N, 0.5f, C.data(), N),
               Error);
}

}  // namespace
}  // namespace qkv
