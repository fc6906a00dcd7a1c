// The panels layout at precision bf16 under fp32_fma products (pack_linear(..., bf16) while
// bf16_products() is fp32_fma; packed_linear): the weight converted once to bf16 panels, x rounded
// to bf16 per product, each panel row widened to f32 in registers and multiplied by the fp32
// micro-kernel. Checked against the exact product of the rounded operands within the f32
// accumulation bound (bf16_bound.h) for every tile shape; bit for bit the fp32 panels' product of
// the rounded x and the rounded weight (the same FMAs in the same order); the same bits on one
// thread and on two, alone and in a batch; a weight held in bf16 packs to the same bits; from
// bf16_fma_min_rows rows the fp32 GEMM on the rounded originals takes over.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "bf16_bound.h"
#include "helpers.h"
#include "packed_product.h"
#include "qkv/kernels/bf16.h"
#include "qkv/kernels/gemm.h"

namespace qkv {
namespace {

using testing::product;
using testing::values;
using kernels::Bf16Products;
using kernels::Bf16ProductsScope;
using kernels::MatmulPrecision;

Tensor rounded(const Tensor& t) {  // f32, every value rounded to bf16
  Tensor r = t.clone();
  float* p = r.data<float>();
  for (int64_t i = 0; i < r.numel(); ++i) p[i] = bf16_test::bf(p[i]);
  return r;
}

Tensor held_in_bf16(const Tensor& w) {  // w's values rounded to bf16, as bf16 bits (a held weight)
  Tensor h = Tensor::empty(w.shape(), DType::bf16);
  kernels::round_to_bf16(w.data<float>(), static_cast<uint16_t*>(h.raw_data()), w.numel());
  return h;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.data<float>(), b.data<float>(), size_t(a.numel()) * 4) == 0;
}

// out (M, N) against x (M, K) @ w^T + b with x and w rounded to bf16 (b is not).
void check(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& out) {
  const int64_t M = x.size(0), K = x.size(1), N = out.size(1);
  std::vector<float> c0(size_t(M * N), 0.f);
  if (b.defined())
    for (int64_t m = 0; m < M; ++m) std::memcpy(&c0[size_t(m * N)], b.data<float>(), size_t(N) * sizeof(float));
  bf16_test::check_gemm(false, true, M, N, K, 1.f, values(x), K, values(w), K, 1.f, c0, values(out), N);
}

TEST(Bf16Panels, MatchTheExactProductOfRoundedOperandsForEveryTileShape) {
  // M: one 8-row tile, partial ones, several, up to one below bf16_fma_min_rows; N: whole and
  // partial 32-column panels (a padded bias); K: 1, odd, whole and partial 16-value vectors.
  const Bf16ProductsScope fma(Bf16Products::fp32_fma);
  for (int64_t M : std::vector<int64_t>{1, 2, 7, 8, 9, 33, kernels::bf16_fma_min_rows - 1}) {
    for (int64_t N : {1, 31, 32, 33, 70}) {
      for (int64_t K : {1, 5, 16, 33, 129}) {
        for (bool bias : {true, false}) {
          SCOPED_TRACE(::testing::Message() << "M " << M << " N " << N << " K " << K << " bias " << bias);
          Tensor x = testing::randn({M, K}, uint64_t(M * 1000 + N * 10 + K));
          Tensor w = testing::randn({N, K}, uint64_t(N * 31 + K));
          Tensor b = bias ? testing::randn({N}, uint64_t(N + 5)) : Tensor();
          const auto p = kernels::pack_linear(w, b, MatmulPrecision::bf16);
          ASSERT_TRUE(p.bf16_panels != nullptr && p.bf16 == nullptr && !p.panels.defined());
          EXPECT_EQ(p.precision, MatmulPrecision::bf16);
          const Tensor got = product(x, p);
          check(x, w, b, got);
          // The fp32 panels of the rounded weight, on the rounded x: the same FMAs, the same bits.
          const auto f32 = kernels::pack_linear(rounded(w), b);
          ASSERT_TRUE(f32.panels.defined());
          EXPECT_TRUE(same_bits(got, product(rounded(x), f32)));
        }
      }
    }
  }
}

TEST(Bf16Panels, RoundBothOperands) {
  // Far from the f32 product of the operands as given (bf16's rounding, about 2^-9 per term).
  const Bf16ProductsScope fma(Bf16Products::fp32_fma);
  Tensor x = testing::randn({5, 100}, 61), w = testing::randn({40, 100}, 62), b = testing::randn({40}, 63);
  const Tensor bf16 = product(x, kernels::pack_linear(w, b, MatmulPrecision::bf16));
  const Tensor f32 = product(x, kernels::pack_linear(w, b));
  float worst = 0.f;
  for (int64_t i = 0; i < bf16.numel(); ++i)
    worst = std::max(worst, std::fabs(bf16.data<float>()[i] - f32.data<float>()[i]));
  EXPECT_GT(worst, 1e-3f);
}

TEST(Bf16Panels, BitsDependNeitherOnThreadsNorOnTheOtherRows) {
  // Large enough for the pool whatever the wait policy (M * N * K >= 2^22); N = 1001 (a partial
  // last panel): a row alone has the batch's bits, on one thread and on two.
  const Bf16ProductsScope fma(Bf16Products::fp32_fma);
  const int64_t M = 20, N = 1001, K = 300;
  Tensor w = testing::randn({N, K}, 31), b = testing::randn({N}, 33), x = testing::randn({M, K}, 34);
  const auto p = kernels::pack_linear(w, b, MatmulPrecision::bf16);
  Tensor one, two;
  {
    testing::ThreadGuard t(1);
    one = product(x, p);
  }
  {
    testing::ThreadGuard t(2);
    two = product(x, p);
  }
  EXPECT_TRUE(same_bits(one, two));
  check(x, w, b, two);
  for (int64_t m = 0; m < M; m += 7) {
    Tensor row = Tensor::empty({1, K});
    std::memcpy(row.data<float>(), x.data<float>() + m * K, size_t(K) * sizeof(float));
    const Tensor alone = product(row, p);
    EXPECT_EQ(std::memcmp(alone.data<float>(), two.data<float>() + m * N, size_t(N) * sizeof(float)), 0) << m;
  }
}

TEST(Bf16Panels, HeldWeightsPackTheSameBitsOnce) {
  // A weight held in bf16 (its bits) and the f32 weight it was rounded from: the same panels, the
  // same products; one conversion each, none per product.
  const Bf16ProductsScope fma(Bf16Products::fp32_fma);
  const int64_t N = 70, K = 45;
  Tensor w = testing::randn({N, K}, 71), b = testing::randn({N}, 72), x = testing::randn({9, K}, 73);
  const Tensor held = held_in_bf16(w);
  const int64_t before = kernels::bf16_weights_packed();
  const auto from_f32 = kernels::pack_linear(w, b, MatmulPrecision::bf16);
  const auto from_held = kernels::pack_linear(held, b, MatmulPrecision::bf16);
  EXPECT_EQ(kernels::bf16_weights_packed() - before, 2);
  ASSERT_TRUE(from_f32.bf16_panels && from_held.bf16_panels);
  const size_t bytes = size_t((N + 31) / 32 * K * 32) * sizeof(uint16_t);
  EXPECT_EQ(std::memcmp(from_f32.bf16_panels.get(), from_held.bf16_panels.get(), bytes), 0);
  const Tensor a = product(x, from_f32);
  EXPECT_TRUE(same_bits(a, product(x, from_held)));
  EXPECT_EQ(kernels::bf16_weights_packed() - before, 2);
  check(x, w, b, a);
}

TEST(Bf16Panels, BatchRowsTakeTheFp32GemmOnTheRoundedOriginals) {
  // From bf16_fma_min_rows rows: the fp32 GEMM on the rounded x and the original weight (a held
  // one widened; a held stack, as PackedWeights keeps it, from its parts), bias rows first, bit for
  // bit; below, the panels.
  const Bf16ProductsScope fma(Bf16Products::fp32_fma);
  const int64_t N = 40, K = 24, rows = kernels::bf16_fma_min_rows;
  Tensor w = testing::randn({N, K}, 21), bias = testing::randn({N}, 22);
  const Tensor held = held_in_bf16(w);
  const Tensor top = held_in_bf16(w.as_strided({16, K}, {K, 1}, 0).contiguous());  // rows 0-15, then 16-39
  const Tensor rest = held_in_bf16(w.as_strided({N - 16, K}, {K, 1}, 16 * K).contiguous());
  for (int form = 0; form < 3; ++form)
    for (bool with_bias : {true, false}) {
      SCOPED_TRACE(::testing::Message() << (form == 0 ? "f32" : form == 1 ? "held" : "held stack") << " bias "
                                        << with_bias);
      const Tensor b = with_bias ? bias : Tensor();
      kernels::PackedLinear p = kernels::pack_linear(form == 0 ? w : held, b, MatmulPrecision::bf16);
      ASSERT_TRUE(p.bf16_panels);
      if (form == 2) {  // the originals as two held parts, no joined copy
        p.weight = Tensor();
        p.rows = {top, rest};
      }
      for (int64_t M : {rows, rows + 37}) {
        Tensor x = testing::randn({M, K}, uint64_t(23 + M));
        const std::vector<float> x16 = values(rounded(x)), w16 = values(rounded(w));
        std::vector<float> want(size_t(M * N), 0.f);
        if (with_bias)
          for (int64_t i = 0; i < M; ++i) std::memcpy(&want[size_t(i * N)], bias.data<float>(), size_t(N) * 4);
        kernels::gemm(false, true, M, N, K, 1.f, x16.data(), K, w16.data(), K, with_bias ? 1.f : 0.f, want.data(), N);
        EXPECT_EQ(values(product(x, p)), want) << "M " << M;
      }
    }
}

}  // namespace
}  // namespace qkv
