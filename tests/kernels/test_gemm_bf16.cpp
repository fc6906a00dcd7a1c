// The bf16 GEMM backend (kernels/bf16.h): rounding against torch, products against an exact
// (double) product of the bf16-rounded operands, the precision setting, the primitive cache and
// the refusal on a CPU without AMX / AVX512_BF16 (oneDNN's ISA capped in a child process).
//
// Error bound: see bf16_bound.h (products of bf16-rounded operands are exact in f32; what remains
// is the f32 accumulation).
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <vector>

#include "bf16_bound.h"
#include "helpers.h"
#include "qkv/kernels/bf16.h"
#include "qkv/kernels/bf16_step_weights.h"
#include "qkv/kernels/gemm.h"
#include "qkv/tensor/rng.h"
#include "ref.h"

namespace qkv {
namespace {

using kernels::MatmulPrecision;

bool capped() { return std::getenv("ONEDNN_MAX_CPU_ISA") || std::getenv("DNNL_MAX_CPU_ISA"); }

#define SKIP_WITHOUT_BF16()                                                                      \
  if (!kernels::dnnl_cpu_info().bf16_native())                                                   \
    GTEST_SKIP() << "oneDNN has no bf16 kernel here (" << kernels::dnnl_cpu_info().isa << ")";

using testing::randn_values;

using bf16_test::bf;
using bf16_test::check_gemm;
using bf16_test::kU32;

using kernels::Bf16Products;

void run_gemm_case(Bf16Products how, bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t pad, float alpha,
                   float beta, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << kernels::bf16_products_name(how) << " " << (ta ? "t" : "n") << (tb ? "t" : "n")
                                    << " M " << M << " N " << N << " K " << K << " pad " << pad << " alpha " << alpha
                                    << " beta " << beta);
  int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
  auto A = randn_values((ta ? K : M) * lda, seed);
  auto B = randn_values((tb ? N : K) * ldb, seed + 1, 0.5f);
  auto C0 = randn_values(M * ldc, seed + 2);
  auto C = C0;
  kernels::gemm_bf16_rounded(how, ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
  check_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C0, C, ldc);
  // The padding columns of C are not written.
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = N; j < ldc; ++j) ASSERT_EQ(C[size_t(i * ldc + j)], C0[size_t(i * ldc + j)]);
}

TEST(Bf16Rounding, MatchesTorch) {
  testing::RefFile ref("kernels_bf16");
  for (const auto& c : ref.cases()) {
    SCOPED_TRACE(c);
    Tensor x = ref.get(c, "x"), bits = ref.get(c, "bf16_bits");
    ASSERT_EQ(x.numel(), bits.numel());
    std::vector<uint16_t> y(size_t(x.numel()));
    kernels::round_to_bf16(x.data<float>(), y.data(), x.numel());
    int64_t bad = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      uint32_t xb;
      std::memcpy(&xb, x.data<float>() + i, 4);
      uint32_t want = uint32_t(bits.data<int32_t>()[i]);
      EXPECT_EQ(kernels::to_bf16(x.data<float>()[i]), y[size_t(i)]);  // scalar == vectorised
      if (y[size_t(i)] != want && bad++ < 8)
        ADD_FAILURE() << std::hex << "x bits 0x" << xb << ": got 0x" << y[size_t(i)] << ", torch 0x" << want;
    }
    EXPECT_EQ(bad, 0);
  }
}

// Both ways of running a bf16 product (kernels/bf16.h); fp32_fma needs no bf16 instructions, so it
// is checked on every CPU, native only where oneDNN has a bf16 kernel.
TEST(Bf16Gemm, ShapeClassesWithinTheF32AccumulationBound) {
  for (Bf16Products how : {Bf16Products::native, Bf16Products::fp32_fma}) {
    if (how == Bf16Products::native && !kernels::dnnl_cpu_info().bf16_native()) continue;
    uint64_t seed = 100;
    for (auto [ta, tb] : {std::pair{false, false}, {false, true}, {true, false}, {true, true}}) {
      run_gemm_case(how, ta, tb, 7, 5, 3, 0, 1.f, 0.f, seed++);         // tiny
      run_gemm_case(how, ta, tb, 37, 29, 131, 3, 1.f, 0.f, seed++);     // odd sizes, padded leading dims
      run_gemm_case(how, ta, tb, 64, 192, 192, 0, 1.f, 1.f, seed++);    // a d=192 projection, accumulate
      run_gemm_case(how, ta, tb, 33, 1, 768, 0, 1.f, 0.f, seed++);      // N = 1
      run_gemm_case(how, ta, tb, 1, 257, 768, 0, 1.f, 0.f, seed++);     // M = 1 (one decoding step)
      run_gemm_case(how, ta, tb, 16, 40, 3072, 1, 1.f, 0.f, seed++);    // large K
      run_gemm_case(how, ta, tb, 9, 11, 13, 2, 0.5f, -2.f, seed++);     // alpha, beta
      run_gemm_case(how, ta, tb, 256, 384, 512, 0, 1.f, 1.f, seed++);   // large: oneDNN's f32 matmul for fp32_fma
    }
  }
}

// fp32_fma is, by definition, the fp32 GEMM on the operands' bf16 values: bit for bit the same as
// rounding them first and calling gemm() in fp32 (small products go to OpenBLAS, large ones to
// oneDNN's f32 matmul; both paths are covered), and not the fp32 product of the unrounded operands.
TEST(Bf16Gemm, Fp32FmaIsTheFp32GemmOnRoundedOperands) {
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{19, 23, 41}, {256, 512, 384}})
    for (auto [ta, tb] : {std::pair{false, false}, {false, true}, {true, false}, {true, true}}) {
      SCOPED_TRACE(::testing::Message() << ta << tb << " " << M << "x" << N << "x" << K);
      const int64_t lda = ta ? M : K, ldb = tb ? K : N;
      auto A = randn_values(M * K, uint64_t(M + N)), B = randn_values(K * N, uint64_t(K));
      auto C0 = randn_values(M * N, 3);
      auto A16 = A, B16 = B;
      for (auto& v : A16) v = bf(v);
      for (auto& v : B16) v = bf(v);
      auto got = C0, want = C0, unrounded = C0;
      kernels::gemm_bf16_rounded(Bf16Products::fp32_fma, ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, 1.f,
                                 got.data(), N);
      kernels::gemm(ta, tb, M, N, K, 0.5f, A16.data(), lda, B16.data(), ldb, 1.f, want.data(), N);
      kernels::gemm(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, 1.f, unrounded.data(), N);
      EXPECT_EQ(got, want);
      EXPECT_NE(got, unrounded);
    }
}

TEST(Bf16Gemm, EmptyAndZeroK) {
  SKIP_WITHOUT_BF16();
  std::vector<float> C{1.f, 2.f, 3.f, 4.f};
  kernels::gemm_bf16(false, false, 2, 2, 0, 1.f, (const float*)nullptr, 1, nullptr, 2, 0.5f, C.data(), 2);
  EXPECT_EQ(C, (std::vector<float>{0.5f, 1.f, 1.5f, 2.f}));
  kernels::gemm_bf16(false, false, 0, 2, 3, 1.f, (const float*)nullptr, 3, nullptr, 2, 0.f, C.data(), 2);
  EXPECT_EQ(C, (std::vector<float>{0.5f, 1.f, 1.5f, 2.f}));
}

// The tensor front-end under a MatmulPrecisionScope: batched products with transposed views,
// broadcast and reduction over the batch, and linear with its bias, against exact products of the
// rounded operands; with the scope gone, fp32 is back and bit-identical to before.
void front_end_follows_the_precision_scope() {
  Tensor x = testing::randn(Shape{2, 3, 17, 24}, 7), y = testing::randn(Shape{2, 3, 9, 24}, 8);
  Tensor yt = testing::transposed_view(y);  // (2, 3, 24, 9), a transpose flag for the GEMM
  Shape batch{2, 3};
  Tensor fp32_before = Tensor::empty(Shape{2, 3, 17, 9});
  kernels::batched_matmul(x, yt, batch, fp32_before);
  Tensor out = Tensor::empty(Shape{2, 3, 17, 9}), summed = Tensor::empty(Shape{17, 9});
  {
    kernels::MatmulPrecisionScope bf16(MatmulPrecision::bf16);
    EXPECT_EQ(kernels::matmul_precision(), MatmulPrecision::bf16);
    kernels::batched_matmul(x, yt, batch, out);
    kernels::batched_matmul(x, yt, batch, summed);  // reduced over the whole batch
  }
  EXPECT_EQ(kernels::matmul_precision(), MatmulPrecision::fp32);
  Tensor fp32_after = Tensor::empty(Shape{2, 3, 17, 9});
  kernels::batched_matmul(x, yt, batch, fp32_after);
  EXPECT_TRUE(testing::bit_equal(fp32_before, fp32_after));

  const float* xp = x.data<float>();
  const float* yp = y.data<float>();
  int64_t differs = 0;
  for (int64_t i = 0; i < 17; ++i)
    for (int64_t j = 0; j < 9; ++j) {
      double total = 0, total_abs = 0;
      for (int64_t b = 0; b < 6; ++b) {
        double s = 0, abs_s = 0;
        for (int64_t k = 0; k < 24; ++k) {
          double p = double(bf(xp[(b * 17 + i) * 24 + k])) * bf(yp[(b * 9 + j) * 24 + k]);
          s += p, abs_s += std::fabs(p);
        }
        float got = out.data<float>()[(b * 17 + i) * 9 + j];
        EXPECT_LE(std::fabs(got - s), (24 + 2) * kU32 * abs_s + 2 * kU32 * std::fabs(s)) << b << " " << i << " " << j;
        differs += got != fp32_before.data<float>()[(b * 17 + i) * 9 + j];
        total += s, total_abs += abs_s;
      }
      // Six products summed in f32 on top of each one's bound.
      EXPECT_LE(std::fabs(summed.data<float>()[i * 9 + j] - total), (24 + 2 + 6) * kU32 * total_abs);
    }
  EXPECT_GT(differs, 17 * 9 * 6 / 2) << "bf16 products should differ from fp32 on unrounded inputs";

  // linear: x (R, K) @ w^T + bias, the bias fused as beta = 1.
  Tensor a = testing::randn(Shape{50, 192}, 9), w = testing::randn(Shape{768, 192}, 10),
         bias = testing::randn(Shape{768}, 11), lin = Tensor::empty(Shape{50, 768});
  {
    kernels::MatmulPrecisionScope bf16(MatmulPrecision::bf16);
    kernels::linear(a, w, bias, lin);
  }
  for (int64_t r = 0; r < 50; r += 7)
    for (int64_t n = 0; n < 768; n += 5) {
      double s = 0, abs_s = 0;
      for (int64_t k = 0; k < 192; ++k) {
        double p = double(bf(a.data<float>()[r * 192 + k])) * bf(w.data<float>()[n * 192 + k]);
        s += p, abs_s += std::fabs(p);
      }
      double c0 = bias.data<float>()[n], exact = s + c0;
      EXPECT_LE(std::fabs(lin.data<float>()[r * 768 + n] - exact),
                (192 + 2) * kU32 * abs_s + 2 * kU32 * (std::fabs(c0) + std::fabs(exact)));
    }
}

TEST(Bf16Gemm, FrontEndFollowsThePrecisionScope) {
  SKIP_WITHOUT_BF16();
  const Bf16Products process = kernels::bf16_products();
  for (Bf16Products how : {Bf16Products::native, Bf16Products::fp32_fma}) {
    SCOPED_TRACE(kernels::bf16_products_name(how));
    kernels::set_bf16_products(how);
    front_end_follows_the_precision_scope();
  }
  kernels::set_bf16_products(process);
}

// A weight packed for bf16 (inference) under native bf16 products: packed_linear is oneDNN's bf16
// matmul against the converted weight, below bf16_fma_min_rows rows or with native products at
// the call; from that many rows with fp32_fma it is, bit for bit, the fp32 GEMM on the rounded x
// and the original weight, bias first. (Packed under fp32_fma: test_bf16_panels.cpp.)
TEST(Bf16Gemm, PackedLinearTakesFp32FmaFromBatchRows) {
  SKIP_WITHOUT_BF16();
  const int64_t N = 40, K = 24, rows = kernels::bf16_fma_min_rows;
  Tensor w = testing::randn(Shape{N, K}, 21), bias = testing::randn(Shape{N}, 22);
  const kernels::Bf16ProductsScope packed_native(Bf16Products::native);
  const kernels::PackedLinear p = kernels::pack_linear(w, bias, MatmulPrecision::bf16);
  ASSERT_TRUE(p.bf16);
  for (Bf16Products how : {Bf16Products::native, Bf16Products::fp32_fma})
    for (int64_t M : {rows - 1, rows, rows + 37}) {
      SCOPED_TRACE(::testing::Message() << kernels::bf16_products_name(how) << " M " << M);
      const kernels::Bf16ProductsScope at_call(how);
      Tensor x = testing::randn(Shape{M, K}, uint64_t(23 + M)), got = Tensor::empty(Shape{M, N});
      kernels::packed_linear(x, p, got);
      std::vector<float> want(size_t(M * N));
      if (how == Bf16Products::fp32_fma && M >= rows) {
        std::vector<float> x16(x.data<float>(), x.data<float>() + M * K), w16(w.data<float>(), w.data<float>() + N * K);
        for (auto& v : x16) v = bf(v);
        for (auto& v : w16) v = bf(v);
        for (int64_t i = 0; i < M; ++i) std::memcpy(&want[size_t(i * N)], bias.data<float>(), size_t(N) * 4);
        kernels::gemm(false, true, M, N, K, 1.f, x16.data(), K, w16.data(), K, 1.f, want.data(), N);
      } else {
        kernels::gemm_bf16_packed(M, x.data<float>(), K, *p.bf16, bias.data<float>(), want.data(), N);
      }
      EXPECT_EQ(std::vector<float>(got.data<float>(), got.data<float>() + M * N), want);
    }
}

TEST(Bf16Gemm, PrimitivesAreCachedPerShape) {
  SKIP_WITHOUT_BF16();
  auto A = randn_values(31 * 47, 1), B = randn_values(47 * 23, 2);
  std::vector<float> C(31 * 23);
  const auto native = Bf16Products::native;
  kernels::gemm_bf16_rounded(native, false, false, 31, 23, 47, 1.f, A.data(), 47, B.data(), 23, 0.f, C.data(), 23);
  int64_t made = kernels::gemm_bf16_primitives_created();
  for (int i = 0; i < 5; ++i)
    kernels::gemm_bf16_rounded(native, false, false, 31, 23, 47, 1.f, A.data(), 47, B.data(), 23, 0.f, C.data(), 23);
  EXPECT_EQ(kernels::gemm_bf16_primitives_created(), made);
  kernels::gemm_bf16_rounded(native, false, false, 31, 22, 47, 1.f, A.data(), 47, B.data(), 23, 0.f, C.data(), 23);
  EXPECT_EQ(kernels::gemm_bf16_primitives_created(), made + 1);
}

TEST(Bf16Isa, ReportsWhatTheCpuHas) {
  if (capped()) GTEST_SKIP() << "oneDNN's ISA is capped by the environment";
  const auto& info = kernels::dnnl_cpu_info();
  __builtin_cpu_init();
  EXPECT_FALSE(info.cpu_model.empty());
  EXPECT_EQ(info.avx512, bool(__builtin_cpu_supports("avx512f")));
  EXPECT_EQ(info.avx512_bf16 || info.amx, bool(__builtin_cpu_supports("avx512bf16")) || info.amx) << info.isa;
  EXPECT_EQ(info.bf16_native(), info.amx || info.avx512_bf16);
}

// ONEDNN_MAX_CPU_ISA=AVX2 in a child process (a "threadsafe" death test re-runs this binary with
// only this test, so the variable is set before oneDNN first reads it): bf16 is refused, naming
// the ISA and the fix, never run slowly through emulation.
// Runs in the child: caps the ISA, then tries a bf16 product; exit 3 with the error message
// when refused, 2 when the cap did not take, 0 when the product ran.
[[noreturn]] void bf16_gemm_with_avx2_cap() {
  setenv("ONEDNN_MAX_CPU_ISA", "AVX2", 1);
  const auto& info = kernels::dnnl_cpu_info();
  if (info.isa != "avx2" || info.bf16_native()) {
    fprintf(stderr, "isa not capped: %s\n", info.isa.c_str());
    _exit(2);
  }
  std::vector<float> A(12, 1.f), B(12, 1.f), C(9);
  try {
    kernels::MatmulPrecisionScope bf16(MatmulPrecision::bf16);
    kernels::gemm(false, false, 3, 3, 4, 1.f, A.data(), 4, B.data(), 3, 0.f, C.data(), 3);
  } catch (const Error& e) {
    fprintf(stderr, "%s\n", e.what());
    _exit(3);
  }
  _exit(0);
}

TEST(Bf16IsaDeathTest, CappedIsaIsAClearError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(bf16_gemm_with_avx2_cap(), ::testing::ExitedWithCode(3),
              "needs AMX or AVX512_BF16.*'avx2'.*Use precision fp32");
}

// The batched front-end runs one cached primitive on several OpenMP threads at once. Every
// concurrent result must equal the same product computed alone, bit for bit (oneDNN's kernel is
// deterministic for a shape); a scratchpad shared between executions broke this under load.
TEST(Bf16Gemm, ConcurrentExecutionsOfOnePrimitiveAgree) {
  SKIP_WITHOUT_BF16();
  const int64_t M = 96, N = 80, K = 192, kCalls = 64;
  std::vector<Tensor> a, b, alone, together;
  for (int64_t i = 0; i < kCalls; ++i) {
    a.push_back(testing::randn(Shape{M, K}, uint64_t(100 + i)));
    b.push_back(testing::randn(Shape{N, K}, uint64_t(200 + i)));
    alone.push_back(Tensor::empty(Shape{M, N}));
    together.push_back(Tensor::empty(Shape{M, N}));
    kernels::gemm_bf16_rounded(Bf16Products::native, false, true, M, N, K, 1.f, a[i].data<float>(), K,
                               b[i].data<float>(), K, 0.f, alone[i].data<float>(), N);
  }
#pragma omp parallel for schedule(dynamic) num_threads(4)
  for (int64_t i = 0; i < kCalls; ++i)
    kernels::gemm_bf16_rounded(Bf16Products::native, false, true, M, N, K, 1.f, a[size_t(i)].data<float>(), K,
                               b[size_t(i)].data<float>(), K, 0.f, together[size_t(i)].data<float>(), N);
  for (int64_t i = 0; i < kCalls; ++i) EXPECT_TRUE(testing::bit_equal(alone[size_t(i)], together[size_t(i)])) << i;
}

// A refilled step copy (make_bf16_weight + refill_bf16_weight, which writes oneDNN's blocks itself
// where it knows the layout) holds, byte for byte, what oneDNN's own reorder of the to_bf16-rounded
// weight gives (pack_bf16_weight), padding included, in both roles and at sizes off the blocks.
TEST(Bf16StepWeights, RefilledCopyIsOneDnnsLayoutOfTheRoundedWeight) {
  SKIP_WITHOUT_BF16();
  // 5000 x 40: a wide weight, its N padded to 5120 on AMX (gemm_dnnl.cpp's amx_padded_n).
  for (auto [N, K] :
       {std::pair<int64_t, int64_t>{1536, 512}, {512, 2048}, {37, 100}, {64, 32}, {1, 3}, {130, 33}, {5000, 40}})
    for (bool kn : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "N " << N << " K " << K << (kn ? " B (K, N)" : " W (N, K)"));
      // W (N, K) with row stride K + 3; for kn the same matrix stored as B = W^T (K, N), stride N + 5.
      const int64_t ldw = K + 3, ldb = N + 5;
      auto w = randn_values(N * ldw, uint64_t(N * 7 + K));
      std::vector<float> b(size_t(K * ldb), 0.f);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) b[size_t(k * ldb + n)] = w[size_t(n * ldw + k)];
      auto ref = kernels::pack_bf16_weight(w.data(), N, K, ldw);
      // The layout chosen for 32 rows, as pack_bf16_weight's (with AMX it may depend on the rows).
      auto copy = kernels::make_bf16_weight(N, K, kn, 32);
      kernels::refill_bf16_weight(*copy, kn ? b.data() : w.data(), kn ? ldb : ldw);
      const size_t bytes = kernels::bf16_weight_bytes(*ref);
      ASSERT_EQ(kernels::bf16_weight_bytes(*copy), bytes);
      EXPECT_EQ(std::memcmp(kernels::bf16_weight_data(*copy), kernels::bf16_weight_data(*ref), bytes), 0);
      for (auto& v : w) v *= -3.f;  // a second refill overwrites every value
      for (auto& v : b) v *= -3.f;
      ref = kernels::pack_bf16_weight(w.data(), N, K, ldw);
      kernels::refill_bf16_weight(*copy, kn ? b.data() : w.data(), kn ? ldb : ldw);
      EXPECT_EQ(std::memcmp(kernels::bf16_weight_data(*copy), kernels::bf16_weight_data(*ref), bytes), 0);
    }
}

// A wide weight (a vocabulary projection) whose output rows would not start on 64-byte lines: on AMX
// its products of 256 rows or more run 256 rows at a time against its columns padded to a multiple
// of 256, into an aligned scratch copied out (oneDNN's own product is 1.5x slower, gemm_dnnl.cpp),
// and the rows past the last 256 against the weight as N columns. On AMX those 256-row blocks have
// the bits of the same rows' product against the weight padded by hand with zero rows to 4352 (not
// padded again), the rows past them the bits of their own product (oneDNN's kernels at few rows
// round differently for N 4100 and 4352). On every CPU (without AMX nothing is padded and the
// product is oneDNN's own), with and without a bias: the output's stride padding is not written, and
// every value is within the f32 bound.
TEST(Bf16Gemm, WideWeightProductsAreThoseOfTheZeroPaddedWeight) {
  SKIP_WITHOUT_BF16();
  const int64_t N = 4100, Np = 4352, K = 48, M = 2 * 256 + 37, ldo = N + 3;  // rows off the 64-byte lines
  const bool amx = kernels::dnnl_cpu_info().amx;
  auto w = randn_values(N * K, 61, 0.5f), x = randn_values(M * K, 62), bias = randn_values(N, 63);
  std::vector<float> w_padded(size_t(Np * K), 0.f), bias_padded(size_t(Np), 0.f);
  std::copy(w.begin(), w.end(), w_padded.begin());
  std::copy(bias.begin(), bias.end(), bias_padded.begin());
  auto packed = kernels::pack_bf16_weight(w.data(), N, K, K);
  auto by_hand = kernels::pack_bf16_weight(w_padded.data(), Np, K, K);
  const size_t k_blocks_bytes = size_t(64 * 2);  // K 48 in oneDNN's blocks of 32, bf16
  if (amx) {
    EXPECT_EQ(kernels::bf16_weight_bytes(*packed), size_t(Np) * k_blocks_bytes);
  }
  EXPECT_EQ(kernels::bf16_weight_bytes(*by_hand), size_t(Np) * k_blocks_bytes);
  for (bool with_bias : {false, true}) {
    SCOPED_TRACE(with_bias ? "bias" : "no bias");
    const std::vector<float> C0(size_t(M * ldo), -7.f);
    auto y = C0;
    kernels::gemm_bf16_packed(M, x.data(), K, *packed, with_bias ? bias.data() : nullptr, y.data(), ldo);
    if (amx) {
      auto ref = C0;
      std::vector<float> wide(size_t(256 * Np));
      for (int64_t r = 0; r + 256 <= M; r += 256) {  // the same row blocks against the padded-by-hand weight
        kernels::gemm_bf16_packed(256, x.data() + r * K, K, *by_hand, with_bias ? bias_padded.data() : nullptr,
                                  wide.data(), Np);
        for (int64_t i = 0; i < 256; ++i) std::copy_n(wide.begin() + i * Np, N, ref.begin() + (r + i) * ldo);
      }
      const int64_t rest = M % 256;
      kernels::gemm_bf16_packed(rest, x.data() + (M - rest) * K, K, *packed, with_bias ? bias.data() : nullptr,
                                ref.data() + (M - rest) * ldo, ldo);
      EXPECT_TRUE(y == ref);  // bit for bit, stride padding (-7) included
    }
    int64_t written_padding = 0;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = N; j < ldo; ++j) written_padding += y[size_t(i * ldo + j)] != -7.f;
    EXPECT_EQ(written_padding, 0);
    std::vector<float> bias_rows(size_t(M * ldo), 0.f);  // the bias as a beta = 1 addend
    for (int64_t i = 0; with_bias && i < M; ++i) std::copy(bias.begin(), bias.end(), bias_rows.begin() + i * ldo);
    check_gemm(false, true, M, N, K, 1.f, x, K, w, K, with_bias ? 1.f : 0.f, bias_rows, y, ldo);
  }
}

// A training step's weight copies (kernels/bf16_step_weights.h): a Linear's forward (x @ W^T + b)
// and its input gradient (dY @ W) against a registered weight run on a copy converted once per
// role, within the bf16 bound; anything else runs as before; a new scope sees a changed weight.
TEST(Bf16StepWeights, LinearProductsUseOneCopyPerRole) {
  SKIP_WITHOUT_BF16();
  const Bf16Products process = kernels::bf16_products();
  kernels::set_bf16_products(Bf16Products::native);
  const int64_t M = 67, N = 48, K = 40;
  Tensor w = testing::randn(Shape{N, K}, 31), bias = testing::randn(Shape{N}, 32);
  Tensor x = testing::randn(Shape{M, K}, 33), dy = testing::randn(Shape{M, N}, 34);
  auto values = [](const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.numel()); };
  std::vector<float> bias_rows;
  for (int64_t i = 0; i < M; ++i) bias_rows.insert(bias_rows.end(), bias.data<float>(), bias.data<float>() + N);
  {  // fp32 products never look at the copies
    kernels::Bf16StepWeights copies({w});
    Tensor y = Tensor::empty(Shape{M, N});
    kernels::linear(x, w, bias, y);
    EXPECT_EQ(copies.copies_made(), 0);
  }
  const int64_t packed_before = kernels::bf16_weights_packed();
  {
    const kernels::MatmulPrecisionScope bf16(MatmulPrecision::bf16);
    kernels::Bf16StepWeights copies({w, bias});
    for (int round = 0; round < 3; ++round) {  // micro-batches of one step: the copies are reused
      Tensor y = Tensor::empty(Shape{M, N}), dx = Tensor::empty(Shape{M, K});
      kernels::linear(x, w, bias, y);
      check_gemm(false, true, M, N, K, 1.f, values(x), K, values(w), K, 1.f, bias_rows, values(y), N);
      kernels::matmul_2d(dy, w, dx);
      check_gemm(false, false, M, K, N, 1.f, values(dy), N, values(w), K, 0.f, std::vector<float>(size_t(M * K)),
                 values(dx), K);
      EXPECT_EQ(copies.copies_made(), 2);
    }
    EXPECT_EQ(kernels::bf16_weights_packed(), packed_before + 2);
    // Not the whole weight, A transposed, or a non-registered B: the per-call path, no copy.
    Tensor y = Tensor::empty(Shape{M, N - 8}), top = w.as_strided(Shape{N - 8, K}, Shape{K, 1}, w.offset());
    kernels::linear(x, top, Tensor(), y);
    Tensor dw = Tensor::empty(Shape{N, K});
    kernels::matmul_2d(dy.as_strided(Shape{N, M}, Shape{1, N}, dy.offset()), x, dw);
    EXPECT_EQ(copies.copies_made(), 2);
    EXPECT_THROW(kernels::Bf16StepWeights second({w}), Error);  // one scope at a time
  }
  // The optimizer changes the weight between steps: the next step's scope refills both its copies
  // (the storage is kept from step to step) with the new values as it opens, before any product.
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] *= -2.f;
  {
    const kernels::MatmulPrecisionScope bf16(MatmulPrecision::bf16);
    kernels::Bf16StepWeights copies({w});
    EXPECT_EQ(copies.copies_made(), 2);
    Tensor y = Tensor::empty(Shape{M, N}), dx = Tensor::empty(Shape{M, K});
    kernels::linear(x, w, Tensor(), y);
    check_gemm(false, true, M, N, K, 1.f, values(x), K, values(w), K, 0.f, std::vector<float>(size_t(M * N)),
               values(y), N);
    kernels::matmul_2d(dy, w, dx);
    check_gemm(false, false, M, K, N, 1.f, values(dy), N, values(w), K, 0.f, std::vector<float>(size_t(M * K)),
               values(dx), K);
    EXPECT_EQ(copies.copies_made(), 2);
  }
  EXPECT_EQ(kernels::bf16_weights_packed(), packed_before + 2);  // refilled, not made again
  kernels::set_bf16_products(process);
}


// A matrix rounded once (Bf16RoundedOperand) for the products that read it as A (either transpose)
// or as gemm_bf16_packed's x: the same bits as rounding it per product, so the same results bit for
// bit; another pointer, shape or stride rounds as before, and an inner operand that does not match
// leaves the outer one visible.
TEST(Bf16RoundedOperand, ProductsReadTheOneCopy) {
  SKIP_WITHOUT_BF16();
  const int64_t R = 45, N = 36, K = 28, ld = N + 3;  // dY (R, N) with row stride ld
  auto dy = randn_values(R * ld, 41), w = randn_values(N * K, 42), x = randn_values(R * K, 43);
  auto products = [&](std::vector<float>& dx, std::vector<float>& dw, std::vector<float>& y) {
    const auto native = Bf16Products::native;
    kernels::gemm_bf16_rounded(native, false, false, R, K, N, 1.f, dy.data(), ld, w.data(), K, 0.f, dx.data(), K);
    kernels::gemm_bf16_rounded(native, true, false, N, K, R, 1.f, dy.data(), ld, x.data(), K, 0.f, dw.data(), K);
    auto packed = kernels::pack_bf16_weight(w.data(), K, N, N);  // w seen as (K, N): y = dY @ w^T
    kernels::gemm_bf16_packed(R, dy.data(), ld, *packed, nullptr, y.data(), K);
  };
  std::vector<float> dx0(size_t(R * K)), dw0(size_t(N * K)), y0(size_t(R * K));
  products(dx0, dw0, y0);
  std::vector<float> dx1(dx0.size()), dw1(dw0.size()), y1(y0.size());
  {
    kernels::Bf16RoundedOperand once(dy.data(), R, N, ld);
    products(dx1, dw1, y1);
    EXPECT_EQ(once.uses(), 3);
    {
      kernels::Bf16RoundedOperand other(dy.data(), R, N - 1, ld);  // innermost, matches nothing here
      std::vector<float> dx2(dx0.size());
      kernels::gemm_bf16_rounded(Bf16Products::native, false, false, R, K, N, 1.f, dy.data(), ld, w.data(), K, 0.f,
                                 dx2.data(), K);
      EXPECT_EQ(dx2, dx0);
      EXPECT_EQ(other.uses(), 0);
    }
    EXPECT_EQ(once.uses(), 4);
  }
  EXPECT_EQ(dx1, dx0);
  EXPECT_EQ(dw1, dw0);
  EXPECT_EQ(y1, y0);
}

// The constructor that also sums dY's columns (a Linear's bias gradient, in the same pass): the sums
// have kernels::column_sums' bits and the copy is the one the products read, for column counts
// below and above column_sums' 1,024 tile switch, with partial tiles.
TEST(Bf16RoundedOperand, ColumnSumsInTheSamePassKeepTheirBits) {
  SKIP_WITHOUT_BF16();
  for (int64_t N : {300, 1100}) {
    SCOPED_TRACE(N);
    const int64_t R = 37, K = 20;
    Tensor dy = Tensor::from_vector(randn_values(R * N, 51), Shape{R, N});
    auto w = randn_values(N * K, 52);
    Tensor sums0 = Tensor::empty(Shape{N}), sums1 = Tensor::empty(Shape{N});
    kernels::column_sums(dy, sums0);
    std::vector<float> dx0(size_t(R * K)), dx1(dx0.size());
    kernels::gemm_bf16_rounded(Bf16Products::native, false, false, R, K, N, 1.f, dy.data<float>(), N, w.data(), K,
                               0.f, dx0.data(), K);
    {
      kernels::Bf16RoundedOperand once(dy, &sums1);
      kernels::gemm_bf16_rounded(Bf16Products::native, false, false, R, K, N, 1.f, dy.data<float>(), N, w.data(), K,
                                 0.f, dx1.data(), K);
      EXPECT_EQ(once.uses(), 1);
    }
    EXPECT_EQ(sums1.to_vector<float>(), sums0.to_vector<float>());
    EXPECT_EQ(dx1, dx0);
  }
}

// A Linear's x rounded once in the forward and kept for the backward (the third constructor): read
// as x @ W^T's A and as dW = dY^T x's B with the bits of rounding per product, and made live again
// from the kept tensor for a later product; a row stride above K is honoured.
TEST(Bf16RoundedOperand, KeptCopyServesForwardAndWeightGradient) {
  SKIP_WITHOUT_BF16();
  const int64_t R = 29, K = 33, N = 21, ld = K + 5;
  Tensor xs = Tensor::from_vector(randn_values(R * ld, 61), Shape{R, ld});
  Tensor x = xs.as_strided(Shape{R, K}, Shape{ld, 1}, 0);  // (R, K), row stride ld
  auto w = randn_values(N * K, 62), dy = randn_values(R * N, 63);
  const auto native = Bf16Products::native;
  auto products = [&](std::vector<float>& y, std::vector<float>& dw) {
    kernels::gemm_bf16_rounded(native, false, true, R, N, K, 1.f, x.data<float>(), ld, w.data(), K, 0.f, y.data(), N);
    kernels::gemm_bf16_rounded(native, true, false, N, K, R, 1.f, dy.data(), N, x.data<float>(), ld, 0.f, dw.data(),
                               K);
  };
  std::vector<float> y0(size_t(R * N)), dw0(size_t(N * K)), y1(y0.size()), dw1(dw0.size()), y2(y0.size()),
      dw2(dw0.size());
  products(y0, dw0);
  Tensor kept;
  {
    kernels::Bf16RoundedOperand once(x, Tensor());
    products(y1, dw1);
    EXPECT_EQ(once.uses(), 2);
    kept = once.kept();
  }
  ASSERT_TRUE(kept.defined());
  EXPECT_EQ(kept.numel(), R * K * 2);
  {
    kernels::Bf16RoundedOperand again(x, kept);
    products(y2, dw2);
    EXPECT_EQ(again.uses(), 2);
  }
  EXPECT_EQ(y1, y0);
  EXPECT_EQ(dw1, dw0);
  EXPECT_EQ(y2, y0);
  EXPECT_EQ(dw2, dw0);
  EXPECT_THROW(kernels::Bf16RoundedOperand(x, Tensor::empty(Shape{R * K}, DType::u8)), Error);
}

}  // namespace
}  // namespace qkv
