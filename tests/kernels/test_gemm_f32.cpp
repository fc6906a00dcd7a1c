// The fp32 GEMM backends (kernels/gemm.h): oneDNN's f32 matmul against an exact (double)
// product, the front-end's choice between it and OpenBLAS, determinism, and the setting's errors.
//
// Error bound. Each of the K products a*b is rounded once at most (or not at all under FMA) and
// the f32 sum of K terms, in any order oneDNN blocks it, adds at most gamma_{K-1} sum|a_k b_k|
// (gamma_n = n u / (1 - n u), u = 2^-24); alpha and the beta post-op add one rounding each. So
//   |C - C_exact| <= (K + 2) u (1 + 1e-6) |alpha| sum_k |a_k b_k| + 2 u |beta c0| + 2 u |C_exact|,
// with C_exact in double (its own error, ~2^-53, is negligible).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "bf16_bound.h"
#include "helpers.h"
#include "qkv/kernels/bf16.h"
#include "qkv/kernels/gemm.h"
#include "qkv/util/error.h"

namespace qkv {
namespace {

#define SKIP_WITHOUT_ONEDNN_F32()                                                                  \
  if (!kernels::gemm_f32_onednn_available())                                                       \
    GTEST_SKIP() << "oneDNN has no AVX-512 here (" << kernels::dnnl_cpu_info().isa << ")";

using bf16_test::kU32;
using testing::randn_values;

// Sets the process's fp32 backend for one scope, then restores it.
class BackendScope {
 public:
  explicit BackendScope(const char* name) : saved_(kernels::f32_gemm_backend()) { kernels::set_f32_gemm_backend(name); }
  ~BackendScope() { kernels::set_f32_gemm_backend(saved_.c_str()); }

 private:
  std::string saved_;
};

struct Case {
  bool ta, tb;
  int64_t M, N, K, pad;
  float alpha, beta;
};

struct Operands {
  int64_t lda, ldb, ldc;
  std::vector<float> A, B, C0;
};

Operands operands(const Case& c, uint64_t seed) {
  Operands o;
  o.lda = (c.ta ? c.M : c.K) + c.pad, o.ldb = (c.tb ? c.K : c.N) + c.pad, o.ldc = c.N + c.pad;
  o.A = randn_values((c.ta ? c.K : c.M) * o.lda, seed);
  o.B = randn_values((c.tb ? c.N : c.K) * o.ldb, seed + 1, 0.5f);
  o.C0 = randn_values(c.M * o.ldc, seed + 2);
  return o;
}

// Checks C against the exact product (the bound above) and that C's padding columns are untouched.
void check_gemm(const Case& c, const Operands& o, const std::vector<float>& C) {
  int64_t bad = 0;
  double worst = 0;
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      double s = 0, abs_s = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double a = c.ta ? o.A[size_t(k * o.lda + i)] : o.A[size_t(i * o.lda + k)];
        const double b = c.tb ? o.B[size_t(j * o.ldb + k)] : o.B[size_t(k * o.ldb + j)];
        s += a * b, abs_s += std::fabs(a * b);
      }
      const double c0 = o.C0[size_t(i * o.ldc + j)], exact = c.alpha * s + c.beta * c0;
      const double bound = (c.K + 2) * kU32 * (1 + 1e-6) * std::fabs(c.alpha) * abs_s +
                           2 * kU32 * std::fabs(c.beta * c0) + 2 * kU32 * std::fabs(exact);
      const double err = std::fabs(C[size_t(i * o.ldc + j)] - exact);
      worst = std::max(worst, bound > 0 ? err / bound : err);
      if (err > bound && bad++ < 5)
        ADD_FAILURE() << "C[" << i << "," << j << "] = " << C[size_t(i * o.ldc + j)] << ", exact " << exact
                      << ", error " << err << " > bound " << bound;
    }
  EXPECT_EQ(bad, 0) << "of " << c.M * c.N << " (worst error / bound " << worst << ")";
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = c.N; j < o.ldc; ++j) ASSERT_EQ(C[size_t(i * o.ldc + j)], o.C0[size_t(i * o.ldc + j)]);
}

std::string name(const Case& c) {
  return std::string(c.ta ? "t" : "n") + (c.tb ? "t" : "n") + " M " + std::to_string(c.M) + " N " +
         std::to_string(c.N) + " K " + std::to_string(c.K) + " pad " + std::to_string(c.pad) + " alpha " +
         std::to_string(c.alpha) + " beta " + std::to_string(c.beta);
}

// The backend itself, every transpose combination, strided operands, alpha and beta, a skinny and
// a one-row product.
TEST(F32Gemm, OnednnProductsWithinTheF32AccumulationBound) {
  SKIP_WITHOUT_ONEDNN_F32();
  const Case cases[] = {
      {false, true, 64, 256, 512, 0, 1.f, 0.f},   {false, true, 37, 300, 515, 3, 0.5f, 1.5f},
      {false, false, 40, 130, 260, 5, 1.f, 1.f},  {true, false, 33, 96, 200, 0, -2.f, 0.f},
      {true, true, 17, 64, 129, 1, 1.f, 0.25f},   {false, true, 1, 4099, 768, 0, 1.f, 0.f},
      {false, true, 512, 16, 8, 0, 1.f, -1.f},
  };
  uint64_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(name(c));
    const Operands o = operands(c, seed += 10);
    std::vector<float> C = o.C0;
    kernels::gemm_f32_onednn(c.ta, c.tb, c.M, c.N, c.K, c.alpha, o.A.data(), o.lda, o.B.data(), o.ldb, c.beta,
                             C.data(), o.ldc);
    check_gemm(c, o, C);
  }
}

// kernels::gemm sends a product to oneDNN exactly when B is transposed or N <= 1024 (on AMD, with
// neither transposed, also K < 2048), M N K >= 2^23, alpha != 0, outside a parallel region, with the
// onednn setting; a new shape there makes one primitive, a repeated one none. Every product,
// wherever it runs, is within the bound.
TEST(F32Gemm, FrontEndSendsOnlyTheProductsOnednnIsFasterAt) {
  SKIP_WITHOUT_ONEDNN_F32();
  BackendScope onednn("onednn");
  const int64_t M = 64, N = 257, K = 512;  // 2^23 * 257/256 multiply-adds; N unused by other tests
  ASSERT_GE(M * N * K, kernels::f32_onednn_min_macs);
  auto runs_in_onednn = [](const Case& c, uint64_t seed, bool in_parallel = false) {
    SCOPED_TRACE(name(c));
    const Operands o = operands(c, seed);
    std::vector<float> C = o.C0;
    const int64_t before = kernels::gemm_f32_onednn_primitives_created();
    if (in_parallel) {
#pragma omp parallel num_threads(2)
#pragma omp single
      kernels::gemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, o.A.data(), o.lda, o.B.data(), o.ldb, c.beta, C.data(), o.ldc);
    } else {
      kernels::gemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, o.A.data(), o.lda, o.B.data(), o.ldb, c.beta, C.data(), o.ldc);
    }
    check_gemm(c, o, C);
    return kernels::gemm_f32_onednn_primitives_created() - before;
  };
  EXPECT_EQ(runs_in_onednn({false, true, M, N, K, 0, 1.f, 0.f}, 1), 1);
  EXPECT_EQ(runs_in_onednn({false, true, M, N, K, 0, 1.f, 0.f}, 2), 0) << "the same shape again: cached";
  EXPECT_EQ(runs_in_onednn({false, true, M, N, K, 2, 1.f, 1.f}, 3), 1) << "other strides and beta: a new primitive";
  EXPECT_EQ(runs_in_onednn({false, false, M, N, K, 0, 1.f, 0.f}, 4), 1) << "plain B, N <= 1024: oneDNN";
  EXPECT_EQ(runs_in_onednn({true, false, M, N, K, 0, 1.f, 0.f}, 5), 1) << "plain B, N <= 1024: oneDNN";
  ASSERT_GE(8 * 1100 * 1024, kernels::f32_onednn_min_macs);
  EXPECT_EQ(runs_in_onednn({false, false, 8, 1100, 1024, 0, 1.f, 0.f}, 14), 0) << "plain B, N > 1024: OpenBLAS";
  EXPECT_EQ(runs_in_onednn({true, false, 8, 1100, 1024, 0, 1.f, 0.f}, 15), 0) << "plain B, N > 1024: OpenBLAS";
  EXPECT_EQ(runs_in_onednn({false, true, 8, 1100, 1024, 0, 1.f, 0.f}, 16), 1) << "B transposed, any N: oneDNN";
  // Neither transposed at K 2048 (N 513 unused elsewhere): OpenBLAS on AMD, oneDNN on other CPUs;
  // transposed A at that K: oneDNN everywhere. The vendor is read here independently of the library.
  const bool amd = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("vendor_id", 0) == 0) return line.find("AuthenticAMD") != std::string::npos;
    return false;
  }();
  ASSERT_GE(8 * 513 * 2048, kernels::f32_onednn_min_macs);
  EXPECT_EQ(runs_in_onednn({false, false, 8, 513, 2048, 0, 1.f, 0.f}, 17), amd ? 0 : 1) << "NN, K 2048, amd " << amd;
  EXPECT_EQ(runs_in_onednn({false, false, 8, 513, 2047, 0, 1.f, 0.f}, 18), 1) << "NN, K 2047: oneDNN";
  EXPECT_EQ(runs_in_onednn({true, false, 8, 513, 2048, 0, 1.f, 0.f}, 19), 1) << "TN, K 2048: oneDNN";
  EXPECT_EQ(runs_in_onednn({false, true, M, N, 255, 0, 1.f, 0.f}, 6), 0) << "below 2^23: OpenBLAS";
  EXPECT_EQ(runs_in_onednn({false, true, M, N, K + 1, 0, 1.f, 0.f}, 7, true), 0) << "in a parallel region: OpenBLAS";
  EXPECT_EQ(runs_in_onednn({false, true, M, N, K + 2, 0, 0.f, 1.f}, 8), 0) << "alpha 0: OpenBLAS";
  BackendScope openblas("openblas");
  EXPECT_STREQ(kernels::f32_gemm_backend(), "openblas");
  EXPECT_EQ(runs_in_onednn({false, true, M, N, K + 3, 0, 1.f, 0.f}, 9), 0) << "the openblas setting";
}

// A Linear with a bias whose product goes to oneDNN adds the bias in oneDNN's epilogue (one
// primitive made with a bias argument; none under openblas, where out starts as the bias rows and
// the GEMM runs with beta = 1). Both are x @ W^T + b within the bound (the bias as beta 1 times
// C0 = b), for contiguous x and for x with padded rows.
TEST(F32Gemm, LinearAddsTheBiasInOnednnsEpilogue) {
  SKIP_WITHOUT_ONEDNN_F32();
  const int64_t M = 48, N = 515, K = 384;  // 2^23 * 1.13 multiply-adds; N unused by other tests
  ASSERT_GE(M * N * K, kernels::f32_onednn_min_macs);
  for (int64_t pad : {0, 7}) {
    const Case c{false, true, M, N, K, 0, 1.f, 1.f};
    Operands o;
    o.lda = K + pad, o.ldb = K, o.ldc = N;
    o.A = randn_values(M * o.lda, 40 + pad);
    o.B = randn_values(N * K, 41 + pad, 0.5f);
    const std::vector<float> b = randn_values(N, 42 + pad);
    for (int64_t i = 0; i < M; ++i) o.C0.insert(o.C0.end(), b.begin(), b.end());
    const Tensor x = Tensor::from_vector(o.A, Shape{M, o.lda}).as_strided(Shape{M, K}, Shape{o.lda, 1}, 0);
    const Tensor w = Tensor::from_vector(o.B, Shape{N, K}), bias = Tensor::from_vector(b, Shape{N});
    for (const char* backend : {"onednn", "openblas"}) {
      SCOPED_TRACE(std::string(backend) + " pad " + std::to_string(pad));
      BackendScope scope(backend);
      Tensor out = Tensor::empty({M, N}, DType::f32);
      const int64_t before = kernels::gemm_f32_onednn_primitives_created();
      kernels::linear(x, w, bias, out);
      EXPECT_EQ(kernels::gemm_f32_onednn_primitives_created() - before, std::string(backend) == "onednn" ? 1 : 0);
      const float* p = out.data<float>();
      check_gemm(c, o, std::vector<float>(p, p + M * N));
    }
  }
}

// The same product twice gives the same bits (exact resume depends on it), and oneDNN's result is
// not OpenBLAS's (the test above could otherwise not tell the two apart by their values).
TEST(F32Gemm, RepeatedProductsAreBitIdentical) {
  SKIP_WITHOUT_ONEDNN_F32();
  const Case c{false, true, 200, 384, 768, 0, 1.f, 0.f};
  const Operands o = operands(c, 5);
  std::vector<float> first(o.C0.size()), again(o.C0.size()), blas(o.C0.size());
  for (auto* out : {&first, &again})
    kernels::gemm(c.ta, c.tb, c.M, c.N, c.K, 1.f, o.A.data(), o.lda, o.B.data(), o.ldb, 0.f, out->data(), o.ldc);
  EXPECT_EQ(first, again);
  {
    BackendScope openblas("openblas");
    kernels::gemm(c.ta, c.tb, c.M, c.N, c.K, 1.f, o.A.data(), o.lda, o.B.data(), o.ldb, 0.f, blas.data(), o.ldc);
  }
  EXPECT_NE(first, blas) << "oneDNN and OpenBLAS sum in different orders";
  check_gemm(c, o, first);
  check_gemm(c, o, blas);
}

TEST(F32Gemm, UnknownBackendIsAClearError) {
  try {
    kernels::set_f32_gemm_backend("mkl");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("set_f32_gemm_backend: expected onednn or openblas, got 'mkl'"),
              std::string::npos)
        << e.what();
  }
}

// QKV_F32_GEMM is read at the first large product: a wrong value fails there, naming the variable.
void product_with_bad_environment() {
  setenv("QKV_F32_GEMM", "fast", 1);
  std::vector<float> A(64 * 512), B(256 * 512), C(64 * 256);
  try {
    kernels::gemm(false, true, 64, 256, 512, 1.f, A.data(), 512, B.data(), 512, 0.f, C.data(), 256);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::exit(3);
  }
  std::exit(0);
}

TEST(F32GemmDeathTest, BadEnvironmentValueIsAClearError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: the setting is not yet read
  EXPECT_EXIT(product_with_bad_environment(), ::testing::ExitedWithCode(3),
              "QKV_F32_GEMM: expected onednn or openblas, got 'fast'");
}

}  // namespace
}  // namespace qkv
