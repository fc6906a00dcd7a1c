// The rows layout at precision bf16 (pack_linear_rows(..., bf16), packed_linear): the stacked
// weights converted once to bf16 bits, x rounded to bf16 per product, the rows kernel on pairs of
// bf16 values (vdpbf16ps). Checked against the exact product of the rounded operands within
// the f32 accumulation bound (bf16_bound.h) for every tile shape; the bits depend neither on the
// thread count nor on the other rows of x (a row alone equals its row in a batch, on the pool too);
// stacked weights equal their concatenation bit for bit; the copy is counted once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "bf16_bound.h"
#include "helpers.h"
#include "packed_product.h"
#include "qkv/kernels/gemm.h"

namespace qkv {
namespace {

using testing::product;
using testing::values;

// out (M, N) against x (M, K) @ [w_0; w_1; ...]^T + b, every operand rounded to bf16 (b is not).
void check(const Tensor& x, const std::vector<Tensor>& ws, const Tensor& b, const Tensor& out) {
  const int64_t M = x.size(0), K = x.size(1), N = out.size(1);
  std::vector<float> w;
  for (const Tensor& wi : ws) {
    const std::vector<float> v = values(wi);
    w.insert(w.end(), v.begin(), v.end());
  }
  std::vector<float> c0(size_t(M * N), 0.f);
  if (b.defined())
    for (int64_t m = 0; m < M; ++m) std::memcpy(&c0[size_t(m * N)], b.data<float>(), size_t(N) * sizeof(float));
  bf16_test::check_gemm(false, true, M, N, K, 1.f, values(x), K, w, K, 1.f, c0, values(out), N);
}

TEST(PackedRowsBf16, MatchesTheExactProductOfRoundedOperandsForEveryTileShape) {
  // M: 1 (streams per thread; N < 8 rows one by one), 2 (8 weight rows at once), 3-4 (two halves
  // of 4) and several passes; N: whole and partial 8-row blocks; K: whole and partial steps of 32
  // values (vdpbf16ps) or 16 (without AVX512_BF16), odd K (a row's last pair is half padding), a
  // tail never read past the row.
  for (int64_t M : {1, 2, 3, 4, 5, 8, 13}) {
    for (int64_t N : {1, 7, 8, 9, 17, 50}) {
      for (int64_t K : {1, 5, 16, 17, 31, 32, 33, 40, 64, 129}) {
        for (bool bias : {true, false}) {
          SCOPED_TRACE(::testing::Message() << "M " << M << " N " << N << " K " << K << " bias " << bias);
          Tensor x = testing::randn({M, K}, uint64_t(M * 1000 + N * 10 + K));
          Tensor w = testing::randn({N, K}, uint64_t(N * 31 + K));
          Tensor b = bias ? testing::randn({N}, uint64_t(N + 5)) : Tensor();
          const auto p = kernels::pack_linear_rows({w}, b, kernels::MatmulPrecision::bf16);
          ASSERT_TRUE(p.rows_bf16 != nullptr);
          EXPECT_EQ(p.precision, kernels::MatmulPrecision::bf16);
          check(x, {w}, b, product(x, p));
        }
      }
    }
  }
}

TEST(PackedRowsBf16, RoundsBothOperands) {
  // The products are of bf16 values: the result stays within the f32 bound of the rounded
  // operands' exact product (above) and far from the f32 product of the operands as given, whose
  // distance is bf16's rounding (about 2^-9 relative per term), not f32's.
  const int64_t M = 3, N = 24, K = 100;
  Tensor x = testing::randn({M, K}, 61), w = testing::randn({N, K}, 62), b = testing::randn({N}, 63);
  const Tensor bf16 = product(x, kernels::pack_linear_rows({w}, b, kernels::MatmulPrecision::bf16));
  const Tensor f32 = product(x, kernels::pack_linear_rows({w}, b));
  check(x, {w}, b, bf16);
  float worst = 0.f;
  for (int64_t i = 0; i < M * N; ++i) worst = std::max(worst, std::fabs(bf16.data<float>()[i] - f32.data<float>()[i]));
  EXPECT_GT(worst, 1e-3f);
}

TEST(PackedRowsBf16, StackedWeightsEqualTheirConcatenationAndConvertOnce) {
  // [W_q; W_k; W_v] copied into one bf16 (39, 37) buffer: an 8-row block straddles two of them.
  Tensor wq = testing::randn({13, 37}, 11), wk = testing::randn({13, 37}, 12), wv = testing::randn({13, 37}, 13);
  Tensor b = testing::randn({39}, 14);
  const int64_t before = kernels::bf16_weights_packed();
  const auto stacked = kernels::pack_linear_rows({wq, wk, wv}, b, kernels::MatmulPrecision::bf16);
  EXPECT_EQ(kernels::bf16_weights_packed() - before, 1);
  EXPECT_EQ(stacked.N, 39);
  EXPECT_EQ(stacked.rows.size(), 3u);  // the f32 sources, kept for a recorded product
  Tensor all = Tensor::empty({39, 37});  // the concatenation [W_q; W_k; W_v]
  const Tensor parts[3] = {wq, wk, wv};
  for (int i = 0; i < 3; ++i)
    std::memcpy(all.data<float>() + i * 13 * 37, parts[i].data<float>(), 13 * 37 * sizeof(float));
  const auto whole = kernels::pack_linear_rows({all}, b, kernels::MatmulPrecision::bf16);
  for (int64_t M : {1, 2, 4, 6}) {
    SCOPED_TRACE(::testing::Message() << "M " << M);
    Tensor x = testing::randn({M, 37}, 15);
    const Tensor a = product(x, stacked), c = product(x, whole);
    EXPECT_EQ(std::memcmp(a.data<float>(), c.data<float>(), size_t(M * 39) * sizeof(float)), 0);
    check(x, {wq, wk, wv}, b, a);
  }
}

TEST(PackedRowsBf16, BitsDependNeitherOnThreadsNorOnTheOtherRows) {
  // Large enough for the pool whatever the wait policy (N * K >= 2^22), N = 1001 (a partial last
  // block) from two stacked weights: a row alone (1, 2, 4 or 8 streams per thread, a segment
  // boundary inside a thread's range) has the batch's bits, on one thread and on two.
  const int64_t M = 6, K = 4200;
  Tensor w1 = testing::randn({500, K}, 31), w2 = testing::randn({501, K}, 32), b = testing::randn({1001}, 33);
  Tensor x = testing::randn({M, K}, 34);
  const auto p = kernels::pack_linear_rows({w1, w2}, b, kernels::MatmulPrecision::bf16);
  Tensor one, two;
  {
    testing::ThreadGuard t(1);
    one = product(x, p);
  }
  {
    testing::ThreadGuard t(2);
    two = product(x, p);
  }
  EXPECT_EQ(std::memcmp(one.data<float>(), two.data<float>(), size_t(M * 1001) * sizeof(float)), 0);
  check(x, {w1, w2}, b, two);
  for (int threads : {1, 2})
    for (int streams : {1, 2, 4, 8}) {
      testing::ThreadGuard t(threads);
      testing::RowsStreamsGuard s(streams);
      for (int64_t m = 0; m < M; ++m) {
        Tensor row = Tensor::empty({1, K});
        std::memcpy(row.data<float>(), x.data<float>() + m * K, size_t(K) * sizeof(float));
        const Tensor alone = product(row, p);
        EXPECT_EQ(std::memcmp(alone.data<float>(), two.data<float>() + m * 1001, 1001 * sizeof(float)), 0)
            << "threads " << threads << ", streams " << streams << ", row " << m;
      }
    }
}

}  // namespace
}  // namespace qkv
