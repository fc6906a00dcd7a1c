// The rows layout of kernels::PackedLinear (pack_linear_rows, packed_linear): products that read
// the weights in place, against a plain reference loop in double, for every tile shape (M = 1..8
// and larger, N around the 8-row blocks, K around the 16-wide vectors); stacked weights equal
// their concatenation; the bits depend neither on the thread count nor on the other rows of x;
// 1-4 rows on the pool (1, 2, 4 or 8 streams per thread) have each row's bits alone; the panels
// layout agrees with the same reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "helpers.h"
#include "packed_product.h"
#include "qkv/kernels/gemm.h"
#include "ref.h"

namespace qkv {
namespace {

using testing::product;

// out (M, N) = x (M, K) @ w^T + b in double; w given as stacked (N_i, K) pieces.
std::vector<double> reference(const Tensor& x, const std::vector<Tensor>& ws, const Tensor& b) {
  const int64_t M = x.size(0), K = x.size(1);
  int64_t N = 0;
  for (const Tensor& w : ws) N += w.size(0);
  std::vector<double> out(size_t(M * N));
  for (int64_t m = 0; m < M; ++m) {
    int64_t n = 0;
    for (const Tensor& w : ws)
      for (int64_t i = 0; i < w.size(0); ++i, ++n) {
        double s = b.defined() ? double(b.data<float>()[n]) : 0.0;
        for (int64_t k = 0; k < K; ++k) s += double(x.data<float>()[m * K + k]) * double(w.data<float>()[i * K + k]);
        out[size_t(m * N + n)] = s;
      }
  }
  return out;
}

// f32 tolerance (DEVELOPING.md) with the absolute part scaled by sqrt(K), as the other product
// tests do for sums of K products of unit normals.
void expect_close(const Tensor& got, const std::vector<double>& want, int64_t K) {
  const double atol = testing::kF32.atol * std::sqrt(double(K)), rtol = testing::kF32.rtol;
  const float* g = got.data<float>();
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(double(g[i]) - want[i]);
    if (err > atol + rtol * std::fabs(want[i]) && bad++ < 5)
      ADD_FAILURE() << "element " << i << ": got " << g[i] << ", expected " << want[i] << " (error " << err << ")";
  }
  EXPECT_EQ(bad, 0);
}

TEST(PackedRows, MatchesADoubleReferenceForEveryTileShape) {
  // M: one x row, 3-4 (streams of weight rows, each against all of them), 2 and 5+ (8-row blocks,
  // up to 4 x rows per pass: 8 weight rows at once for 1-2, two halves of 4 for 3-4); N: whole and
  // partial 8-row blocks, and rows left over after the streams; K: whole and partial 16-wide vectors.
  for (int64_t M : {1, 2, 3, 4, 5, 6, 7, 8, 13}) {
    for (int64_t N : {1, 7, 8, 9, 17, 24, 50}) {
      for (int64_t K : {1, 5, 15, 16, 17, 40, 129}) {
        for (bool bias : {true, false}) {
          SCOPED_TRACE(::testing::Message() << "M " << M << " N " << N << " K " << K << " bias " << bias);
          Tensor x = testing::randn({M, K}, uint64_t(M * 1000 + N * 10 + K));
          Tensor w = testing::randn({N, K}, uint64_t(N * 31 + K));
          Tensor b = bias ? testing::randn({N}, uint64_t(N + 5)) : Tensor();
          const auto want = reference(x, {w}, b);
          auto rows = kernels::pack_linear_rows({w}, b);
          EXPECT_EQ(rows.layout, kernels::PackLayout::rows);
          expect_close(product(x, rows), want, K);
          expect_close(product(x, kernels::pack_linear(w, b)), want, K);  // the panels, same reference
        }
      }
    }
  }
}

TEST(PackedRows, ReadsTheWeightsInPlace) {
  Tensor w = testing::randn({40, 24}, 1), b = testing::randn({40}, 2), x = testing::randn({3, 24}, 3);
  auto p = kernels::pack_linear_rows({w}, b);
  ASSERT_EQ(p.rows.size(), 1u);
  EXPECT_EQ(p.rows[0].data<float>(), w.data<float>());  // no copy
  EXPECT_FALSE(p.panels.defined());
  w.data<float>()[5 * 24 + 7] += 1.f;  // a write to the weight is seen by the next product
  expect_close(product(x, p), reference(x, {w}, b), 24);
  // Not contiguous, or not f32: refused, naming the function.
  Tensor wide = testing::randn({40, 48}, 4);
  EXPECT_THROW(kernels::pack_linear_rows({wide.as_strided({40, 24}, {48, 1}, 0)}, Tensor()), Error);
  EXPECT_THROW(kernels::pack_linear_rows({testing::randn({4, 3}, 5, DType::f64)}, Tensor()), Error);
  EXPECT_THROW(kernels::pack_linear_rows({w, testing::randn({4, 23}, 6)}, Tensor()), Error);  // K differs
}

TEST(PackedRows, StackedWeightsEqualTheirConcatenation) {
  // [W_q; W_k; W_v] read from three places: an 8-row block straddles two of them (N_i = 13).
  for (int64_t M : {1, 2, 4, 6}) {
    SCOPED_TRACE(::testing::Message() << "M " << M);
    Tensor wq = testing::randn({13, 37}, 11), wk = testing::randn({13, 37}, 12), wv = testing::randn({13, 37}, 13);
    Tensor b = testing::randn({39}, 14), x = testing::randn({M, 37}, 15);
    auto p = kernels::pack_linear_rows({wq, wk, wv}, b);
    EXPECT_EQ(p.N, 39);
    EXPECT_FALSE(p.weight.defined());  // nothing concatenated
    expect_close(product(x, p), reference(x, {wq, wk, wv}, b), 37);
  }
}

TEST(PackedRows, BitsDependNeitherOnThreadsNorOnTheOtherRows) {
  // Large enough for the parallel path (M * N * K >= 2^22), N = 1001: a partial last block.
  const int64_t M = 6, N = 1001, K = 771;
  Tensor x = testing::randn({M, K}, 21), w = testing::randn({N, K}, 22), b = testing::randn({N}, 23);
  auto p = kernels::pack_linear_rows({w}, b);
  Tensor one, two;
  {
    testing::ThreadGuard t(1);
    one = product(x, p);
  }
  {
    testing::ThreadGuard t(2);
    two = product(x, p);
  }
  EXPECT_EQ(std::memcmp(one.data<float>(), two.data<float>(), size_t(M * N) * sizeof(float)), 0);
  expect_close(two, reference(x, {w}, b), K);
  for (int64_t m = 0; m < M; ++m) {  // each row alone: the same bits as in the batch
    Tensor row = Tensor::empty({1, K});
    std::memcpy(row.data<float>(), x.data<float>() + m * K, size_t(K) * sizeof(float));
    Tensor alone = product(row, p);
    EXPECT_EQ(std::memcmp(alone.data<float>(), two.data<float>() + m * N, size_t(N) * sizeof(float)), 0) << "row " << m;
  }
}

TEST(PackedRows, RowsOnThePoolHaveTheBatchsBits) {
  // Large enough for the pool whatever the wait policy (N * K >= 2^22): on two threads the first
  // 111 of the 126 blocks are split (rows 0-439 and 440-887, each as 1, 2, 4 or 8 streams, a row of
  // each part at a time) and the rest claimed 32 rows at a time, the last claim 17 rows (with 8
  // streams, streams of 2 rows, one over); stacked weights put a segment boundary inside the second
  // thread's range. One row, and 3-4 rows (read as streams too, each weight row against all of
  // them, in passes of up to 16 accumulators), and 2 (8-row blocks): every output must have the
  // bits of its row computed alone on one thread, whatever the thread and stream counts.
  const int64_t K = 4200, N = 1001;
  Tensor w1 = testing::randn({500, K}, 31), w2 = testing::randn({501, K}, 32), b = testing::randn({N}, 33);
  Tensor x = testing::randn({4, K}, 34);
  auto p = kernels::pack_linear_rows({w1, w2}, b);
  auto rows_of = [&](int64_t m0, int64_t M) {  // x rows m0 .. m0 + M - 1
    Tensor r = Tensor::empty({M, K});
    std::memcpy(r.data<float>(), x.data<float>() + m0 * K, size_t(M * K) * sizeof(float));
    return r;
  };
  std::vector<Tensor> alone;
  {
    testing::ThreadGuard t(1);
    testing::RowsStreamsGuard s(1);
    for (int64_t m = 0; m < 4; ++m) alone.push_back(product(rows_of(m, 1), p));
  }
  expect_close(product(x, p), reference(x, {w1, w2}, b), K);
  for (int threads : {1, 2})
    for (int streams : {1, 2, 4, 8})
      for (int64_t M : {1, 2, 3, 4}) {
        testing::ThreadGuard t(threads);
        testing::RowsStreamsGuard s(streams);
        const Tensor batch = product(rows_of(0, M), p);
        for (int64_t m = 0; m < M; ++m)
          EXPECT_EQ(std::memcmp(alone[size_t(m)].data<float>(), batch.data<float>() + m * N, N * sizeof(float)), 0)
              << "threads " << threads << ", streams " << streams << ", batch " << M << ", row " << m;
      }
  EXPECT_THROW(kernels::set_rows_streams_per_thread(3), Error);
}

}  // namespace
}  // namespace qkv
