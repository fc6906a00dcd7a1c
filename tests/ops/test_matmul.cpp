// ops/matmul against PyTorch (tools/refs/ops_matmul.py), finite differences, copy-freedom of
// transposed operands, determinism, and error messages.
#include "qkv/ops/matmul.h"

#include <gtest/gtest.h>

#include <cmath>

#include "gradcheck.h"
#include "helpers.h"
#include "pre_view.h"
#include "qkv/autograd/node.h"
#include "qkv/kernels/gemm.h"
#include "qkv/ops/shape.h"
#include "qkv/tensor/storage.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

// f32 tolerance for a value that sums k products: rtol 1e-5, atol sqrt(k) * 1e-6. The references
// are float64 results of the same f32 inputs, so this bounds qkv's own f32 accumulation error,
// which grows like sqrt(k) for random data (blocked BLAS summation; worst case k * eps).
// f64: the usual rtol 1e-10 / atol 1e-12, scaled the same way.
Tol tol_for(DType dt, int64_t k) {
  double s = std::sqrt(double(std::max<int64_t>(k, 1)));
  return dt == DType::f64 ? Tol{1e-10, 1e-12 * s} : Tol{1e-5, 1e-6 * s};
}

// Naive row-major reference for the GEMM front-end test (double accumulation).
std::vector<double> naive_gemm(bool ta, bool tb, int M, int N, int K, const std::vector<float>& A, int lda,
                               const std::vector<float>& B, int ldb) {
  std::vector<double> C(size_t(M * N), 0.0);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      for (int k = 0; k < K; ++k) {
        double a = ta ? A[size_t(k * lda + i)] : A[size_t(i * lda + k)];
        double b = tb ? B[size_t(j * ldb + k)] : B[size_t(k * ldb + j)];
        C[size_t(i * N + j)] += a * b;
      }
  return C;
}

}  // namespace

TEST(Matmul, MatchesPyTorch) {
  RefFile ref("ops_matmul");
  int n = 0;
  for (const auto& c : ref.cases()) {
    if (c.rfind("matmul_", 0) != 0) continue;
    SCOPED_TRACE(c);
    auto p = ref.params(c);
    Tensor a = leaf(ref, c, "a"), b = leaf(ref, c, "b");
    Tensor av = pre_view(a, p["pre_a"]), bv = pre_view(b, p["pre_b"]);
    int64_t copies0 = kernels::gemm_operand_copies();
    Tensor y = matmul(av, bv);
    // Transposed views reach BLAS as flags: only the stride-2 ("s2") operands are copied.
    EXPECT_EQ(kernels::gemm_operand_copies() - copies0, p["copies"].get<int64_t>());
    DType dt = a.dtype();
    EXPECT_CLOSE(y, ref.get(c, "y"), tol_for(dt, p["ky"]));
    int64_t copies1 = kernels::gemm_operand_copies();
    backward(y, ref.get(c, "gy"));
    // Backward uses each saved operand once (da needs b, db needs a), again through flags.
    EXPECT_EQ(kernels::gemm_operand_copies() - copies1, p["copies"].get<int64_t>());
    EXPECT_CLOSE(a.grad(), ref.get(c, "ga"), tol_for(dt, p["ka"]));
    EXPECT_CLOSE(b.grad(), ref.get(c, "gb"), tol_for(dt, p["kb"]));
    ++n;
  }
  EXPECT_GE(n, 20);
}

TEST(Linear, MatchesPyTorch) {
  RefFile ref("ops_matmul");
  int n = 0;
  for (const auto& c : ref.cases()) {
    if (c.rfind("linear_", 0) != 0) continue;
    SCOPED_TRACE(c);
    auto p = ref.params(c);
    Tensor x = leaf(ref, c, "x"), w = leaf(ref, c, "w");
    Tensor bias = p["bias"].get<bool>() ? leaf(ref, c, "bias") : Tensor();
    Tensor y = linear(pre_view(x, p["pre_x"]), w, bias);
    EXPECT_CLOSE(y, ref.get(c, "y"), tol_for(DType::f32, p["ky"]));
    backward(y, ref.get(c, "gy"));
    EXPECT_CLOSE(x.grad(), ref.get(c, "gx"), tol_for(DType::f32, p["kx"]));
    EXPECT_CLOSE(w.grad(), ref.get(c, "gw"), tol_for(DType::f32, p["kw"]));
    if (bias.defined()) {
      EXPECT_CLOSE(bias.grad(), ref.get(c, "gbias"), tol_for(DType::f32, p["kbias"]));
    }
    ++n;
  }
  EXPECT_GE(n, 6);
}

// Zero-sized axes with a bias, each gradient an empty sum: out features 0 (the bias gradient's column
// sums over no columns crashed with a division by zero), rows 0, in features 0.
TEST(Linear, ZeroSizedAxesWithBiasGiveEmptySums) {
  struct Case {
    int64_t R, K, N;
  };
  for (const Case c : {Case{3, 4, 0}, Case{0, 4, 3}, Case{3, 0, 2}}) {
    SCOPED_TRACE(::testing::Message() << "R " << c.R << " K " << c.K << " N " << c.N);
    Tensor x = Tensor::full({c.R, c.K}, 0.5f), w = Tensor::full({c.N, c.K}, 0.25f), b = Tensor::full({c.N}, 2.0f);
    for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(true);
    Tensor y = linear(x, w, b);
    ASSERT_EQ(y.shape(), Shape({c.R, c.N}));
    for (int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y.data<float>()[i], 2.0f + 0.125f * float(c.K));
    backward(y, Tensor::full({c.R, c.N}, 1.0f));
    ASSERT_EQ(x.grad().shape(), x.shape());
    ASSERT_EQ(w.grad().shape(), w.shape());
    ASSERT_EQ(b.grad().shape(), b.shape());
    for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(x.grad().data<float>()[i], 0.25f * float(c.N));
    for (int64_t i = 0; i < w.numel(); ++i) EXPECT_EQ(w.grad().data<float>()[i], 0.5f * float(c.R));
    for (int64_t i = 0; i < b.numel(); ++i) EXPECT_EQ(b.grad().data<float>()[i], float(c.R));
  }
}

TEST(Matmul, GradcheckF64) {
  auto t = [](const std::vector<int64_t>& s, uint64_t seed) { return randn(Shape(s), seed, DType::f64); };
  using In = std::vector<Tensor>;
  auto mm = [](const In& in) { return matmul(in[0], in[1]); };
  EXPECT_GRADCHECK(mm, {t({3, 4}, 1), t({4, 2}, 2)});
  EXPECT_GRADCHECK(mm, {t({4}, 3), t({4, 3}, 4)});
  EXPECT_GRADCHECK(mm, {t({3, 4}, 5), t({4}, 6)});
  EXPECT_GRADCHECK(mm, {t({5}, 7), t({5}, 8)});
  EXPECT_GRADCHECK(mm, {t({2, 1, 3, 4}, 9), t({3, 4, 2}, 10)});
  EXPECT_GRADCHECK(mm, {t({3, 2, 4}, 11), t({4, 5}, 12)});
  EXPECT_GRADCHECK([](const In& in) { return matmul(transpose(in[0], -1, -2), transpose(in[1], 0, 1)); },
                   {t({2, 4, 3}, 13), t({5, 4}, 14)});
  EXPECT_GRADCHECK([](const In& in) { return linear(in[0], in[1], in[2]); }, {t({2, 3, 4}, 15), t({5, 4}, 16), t({5}, 17)});
  EXPECT_GRADCHECK([](const In& in) { return linear(transpose(in[0], 0, 1), in[1]); }, {t({4, 3}, 18), t({2, 4}, 19)});
}

TEST(Matmul, TransposedOperandsAreNotCopied) {
  // An independent check of the copy counter: a (64, 4096) operand given as a transposed view
  // must not be materialised; the only new memory is the 64 x 8 output.
  Tensor a = randn({4096, 64}, 21), b = randn({8, 4096}, 22);
  Tensor at = transpose(a, 0, 1), bt = transpose(b, 0, 1);  // (64, 4096), (4096, 8)
  allocator_reset_peak();
  size_t before = allocator_stats().bytes_in_use;
  int64_t copies = kernels::gemm_operand_copies();
  Tensor y = matmul(at, bt);
  size_t grown = allocator_stats().peak_bytes_in_use - before;
  EXPECT_EQ(kernels::gemm_operand_copies(), copies);
  EXPECT_LT(grown, size_t(64 * 1024)) << "a copy of an operand would need 1 MiB";
  // And the result is right: compare with the product of explicit contiguous copies.
  Tensor y2 = matmul(at.contiguous(), bt.contiguous());
  EXPECT_CLOSE(y, y2, tol_for(DType::f32, 4096));
  // A stride-2 operand cannot go to BLAS and is copied (so the counter can fail).
  Tensor s = slice(randn({64, 16}, 23), 1, 0, kSliceEnd, 2);  // (64, 8), column stride 2
  matmul(s, randn({8, 3}, 24));
  EXPECT_EQ(kernels::gemm_operand_copies(), copies + 1);
}

TEST(Matmul, DeterministicForAFixedThreadCount) {
  // Large (multi-threaded BLAS), batched-small (parallel over the batch), reduced-batch backward.
  for (auto [sa, sb] : {std::pair<Shape, Shape>{{300, 257}, {257, 190}}, {{64, 40, 33}, {64, 33, 50}}, {{5, 40, 60}, {60, 70}}}) {
    Tensor a = randn(sa, 31), b = randn(sb, 32);
    Tensor y1 = matmul(a, b), y2 = matmul(a, b);
    EXPECT_TRUE(bit_equal(y1, y2)) << sa.str() << " @ " << sb.str();
    Tensor g[2];
    for (int r = 0; r < 2; ++r) {
      Tensor bl = b.clone();
      bl.set_requires_grad(true);
      backward(matmul(a, bl), Tensor::ones(y1.shape()));
      g[r] = bl.grad();
    }
    EXPECT_TRUE(bit_equal(g[0], g[1])) << "weight gradient of " << sa.str() << " @ " << sb.str();
  }
  Tensor x = randn({7, 9, 64}, 33), w = randn({48, 64}, 34), bias = randn({48}, 35);
  EXPECT_TRUE(bit_equal(linear(x, w, bias), linear(x, w, bias)));
}

TEST(Gemm, FrontEndAllTransposeFlags) {
  // kernels::gemm against a naive triple loop, with padded leading dimensions, alpha and beta.
  const int M = 7, N = 5, K = 9;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      SCOPED_TRACE(::testing::Message() << "transA " << ta << " transB " << tb);
      int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 1;
      std::vector<float> A = randn({(ta ? K : M) * lda}, 41).to_vector<float>();
      std::vector<float> B = randn({(tb ? N : K) * ldb}, 42).to_vector<float>();
      std::vector<float> C = randn({M * ldc}, 43).to_vector<float>(), C0 = C;
      kernels::gemm(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, 2.0f, C.data(), ldc);
      std::vector<double> ref = naive_gemm(ta, tb, M, N, K, A, lda, B, ldb);
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
          double want = 0.5 * ref[size_t(i * N + j)] + 2.0 * C0[size_t(i * ldc + j)];
          EXPECT_NEAR(C[size_t(i * ldc + j)], want, 1e-5 + 1e-5 * std::abs(want)) << i << "," << j;
        }
      EXPECT_EQ(C[size_t(ldc - 1)], C0[size_t(ldc - 1)]) << "padding of C must stay untouched";
    }
  // K = 0 is an empty sum: C = beta * C.
  float c[2] = {1.f, 2.f};
  kernels::gemm(false, false, 1, 2, 0, 1.f, nullptr, 1, nullptr, 2, 0.f, c, 2);
  EXPECT_EQ(c[0], 0.f);
  EXPECT_EQ(c[1], 0.f);
}

TEST(Matmul, BadInputsThrowNamingOpAndShapes) {
  std::string m = error_of([] { matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5})); });
  EXPECT_MENTIONS(m, "matmul");
  EXPECT_MENTIONS(m, "(2, 3)");
  EXPECT_MENTIONS(m, "(4, 5)");
  m = error_of([] { matmul(Tensor::zeros({2, 3, 4}), Tensor::zeros({3, 4, 5})); });
  EXPECT_MENTIONS(m, "batch");
  EXPECT_MENTIONS(m, "(2, 3, 4)");
  EXPECT_MENTIONS(m, "(3, 4, 5)");
  m = error_of([] { matmul(Tensor::zeros({2, 3}), Tensor::zeros({3, 2}, DType::f64)); });
  EXPECT_MENTIONS(m, "dtypes differ");
  m = error_of([] { matmul(Tensor::zeros({2, 3}, DType::i64), Tensor::zeros({3, 2}, DType::i64)); });
  EXPECT_MENTIONS(m, "f32 or f64");
  m = error_of([] { matmul(Tensor::zeros({}), Tensor::zeros({3})); });
  EXPECT_MENTIONS(m, "at least one axis");
  m = error_of([] { linear(Tensor::zeros({2, 5}), Tensor::zeros({3, 4})); });
  EXPECT_MENTIONS(m, "linear");
  EXPECT_MENTIONS(m, "(2, 5)");
  EXPECT_MENTIONS(m, "(3, 4)");
  m = error_of([] { linear(Tensor::zeros({2, 4}), Tensor::zeros({3, 4}), Tensor::zeros({4})); });
  EXPECT_MENTIONS(m, "bias");
  EXPECT_MENTIONS(m, "(4)");
  m = error_of([] { linear(Tensor::zeros({2, 4}), Tensor::zeros({4})); });
  EXPECT_MENTIONS(m, "(out, in)");
}
