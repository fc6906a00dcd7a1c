// The int8 product (kernels/int8.h) against its published scheme, computed here independently:
// quantization of weights (per row) and activations (per row, u8 with zero point 128) by the
// rules the header states, int64 sums of the integer products, then the same f32 scaling. The
// int32 sums are exact on VNNI / AMX, so the product must equal that reference bit for bit.
// Separately, the product must approximate the f32 product within the quantization bound, and a
// CPU without VNNI (oneDNN's ISA capped in a child process) must be refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "death_result.h"
#include "helpers.h"
#include "int8_threshold.h"
#include "qkv/kernels/gemm.h"
#include "qkv/kernels/int8.h"
#include "qkv/tensor/rng.h"
#include "qkv/util/error.h"

namespace qkv {
namespace {

using testing::Int8SmallWeightRows;
using testing::Int8Threshold;

#define SKIP_WITHOUT_INT8() \
  if (!kernels::int8_supported()) GTEST_SKIP() << "no int8 kernel here (AVX512-VNNI, AMX or an AVX2 build)";

using testing::randn_values;

// The header's activation rule, scalar.
float ref_quantize_row(const float* x, int64_t K, std::vector<int32_t>& q) {
  float amax = 0.f;
  for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(x[k]));
  q.assign(size_t(K), 0);  // q - 128
  if (amax == 0.f) return 0.f;
  const float inv = 127.f / amax;
  for (int64_t k = 0; k < K; ++k) q[size_t(k)] = int32_t(std::nearbyint(x[k] * inv));
  return amax / 127.f;
}

TEST(Int8Quantize, RowRuleWorkedExample) {
  // max |x| = 4, so x * 127/4 = 31.75, -63.5, 15.875, 127: nearest, ties to even -> 32, -64, 16,
  // 127, plus the zero point 128.
  const float x[4] = {1.f, -2.f, 0.5f, 4.f};
  uint8_t q[4];
  EXPECT_EQ(kernels::quantize_row_u8(x, 4, q), 4.f / 127.f);
  EXPECT_EQ(q[0], 160);
  EXPECT_EQ(q[1], 64);
  EXPECT_EQ(q[2], 144);
  EXPECT_EQ(q[3], 255);
}

TEST(Int8Quantize, VectorAndScalarPathsFollowTheRule) {
  for (int64_t K : {1, 15, 16, 17, 100, 768}) {
    std::vector<float> x = randn_values(K, 600 + uint64_t(K), 3.f);
    std::vector<uint8_t> q(static_cast<size_t>(K));
    std::vector<int32_t> want;
    const float s = kernels::quantize_row_u8(x.data(), K, q.data());
    EXPECT_EQ(s, ref_quantize_row(x.data(), K, want)) << "K = " << K;
    for (int64_t k = 0; k < K; ++k) ASSERT_EQ(int32_t(q[size_t(k)]) - 128, want[size_t(k)]) << "K = " << K << ", k = " << k;
  }
  std::vector<float> zeros(40, 0.f);
  std::vector<uint8_t> q(40);
  EXPECT_EQ(kernels::quantize_row_u8(zeros.data(), 40, q.data()), 0.f);
  for (uint8_t v : q) EXPECT_EQ(v, 128);
  zeros[7] = -0.f;  // -0: still a zero row
  EXPECT_EQ(kernels::quantize_row_u8(zeros.data(), 40, q.data()), 0.f);
  // A NaN or an infinity of either sign, in the 16-value steps or in the tail, makes the scale NaN.
  for (int64_t at : {7, 37})
    for (float bad : {NAN, INFINITY, -INFINITY}) {
      std::vector<float> x = randn_values(40, 700 + uint64_t(at));
      x[size_t(at)] = bad;
      EXPECT_TRUE(std::isnan(kernels::quantize_row_u8(x.data(), 40, q.data()))) << at << " " << bad;
    }
}

struct Int8Case {
  int64_t M, N, K;
  bool bias;
};

// Both forms: oneDNN's blocked layout, and the rows (qkv's VNNI kernel below int8_rows_max_batch()
// rows, oneDNN reading the rows as plain weights from there), with the streams a thread reads at
// batch 1 (the rows kernel) at each of their counts.
TEST(Int8Gemm, EqualsTheSchemeComputedExactly) {
  SKIP_WITHOUT_INT8();
  // Decode (M 1-32) and prefill shapes, K not a multiple of 4, 16 or 64, N not of 16, products
  // large enough for two threads (64 x 1024 x 256 = 2^24 multiply-adds; at batch 1, 1000 x 770 with
  // its shared tail), padded row strides.
  const Int8Case cases[] = {Int8Case{1, 1, 1, true},       Int8Case{1, 768, 256, true},  Int8Case{3, 17, 15, false},
                            Int8Case{32, 1000, 256, true}, Int8Case{5, 64, 3072, false}, Int8Case{64, 1024, 256, true},
                            Int8Case{7, 50, 770, true},    Int8Case{1, 1000, 770, true}, Int8Case{15, 9, 130, false},
                            Int8Case{16, 9, 130, true}};
  const int default_streams = kernels::rows_streams_per_thread();
  for (const bool rows : {false, true})
    for (const int streams : {1, 2, 4, 8})
      for (const Int8Case& c : cases) {
        if (!rows && streams != default_streams) continue;  // the blocked form reads no streams
        SCOPED_TRACE(std::string(rows ? "rows, " + std::to_string(streams) + " streams" : "blocked"));
        kernels::set_rows_streams_per_thread(streams);
        const int64_t ldx = c.K + 3, ldo = c.N + 5, ldw = c.K + 1;
        std::vector<float> w = randn_values(c.N * ldw, uint64_t(c.N * 7 + c.K), 0.05f);
        for (int64_t k = 0; k < c.K; ++k) w[size_t(k)] = 0.f;  // a zero row: scale 0
        std::vector<float> x = randn_values(c.M * ldx, uint64_t(c.M * 13 + c.K), 2.f);
        std::vector<float> bias = randn_values(c.N, 99);
        std::vector<float> out(size_t(c.M * ldo), -1.f);
        auto packed = rows ? kernels::pack_int8_weight_rows(w.data(), c.N, c.K, ldw)
                           : kernels::pack_int8_weight(w.data(), c.N, c.K, ldw);
        // Without oneDNN's exact kernels pack_int8_weight gives the rows form too.
        ASSERT_EQ(kernels::int8_weight_in_rows(*packed), rows || !kernels::int8_native());
        ASSERT_EQ(kernels::int8_weight_rows(*packed), c.N);
        ASSERT_EQ(kernels::int8_weight_cols(*packed), c.K);
        kernels::gemm_int8_packed(c.M, x.data(), ldx, *packed, c.bias ? bias.data() : nullptr, out.data(), ldo);

        // The weight rule: sw = max|w| / 127, qw = nearbyint(w * (127 / max|w|)).
        std::vector<int8_t> qw(size_t(c.N * c.K));
        std::vector<float> sw(size_t(c.N));
        kernels::int8_weight_values(*packed, qw.data(), sw.data());
        std::vector<int64_t> wsum(size_t(c.N), 0);
        for (int64_t n = 0; n < c.N; ++n) {
          float amax = 0.f;
          for (int64_t k = 0; k < c.K; ++k) amax = std::max(amax, std::fabs(w[size_t(n * ldw + k)]));
          ASSERT_EQ(sw[size_t(n)], amax / 127.f) << "row " << n;
          const float inv = amax > 0.f ? 127.f / amax : 0.f;
          for (int64_t k = 0; k < c.K; ++k) {
            ASSERT_EQ(qw[size_t(n * c.K + k)], int8_t(std::nearbyint(w[size_t(n * ldw + k)] * inv))) << "row " << n;
            wsum[size_t(n)] += qw[size_t(n * c.K + k)];
          }
        }
        for (int64_t m = 0; m < c.M; ++m) {
          std::vector<int32_t> qx;
          const float sx = ref_quantize_row(x.data() + m * ldx, c.K, qx);
          for (int64_t n = 0; n < c.N; ++n) {
            // sum (qx + 128) qw - 128 sum qw = sum qx qw: the zero point cancels exactly.
            int64_t acc = 0;
            for (int64_t k = 0; k < c.K; ++k) acc += int64_t(qx[size_t(k)] + 128) * qw[size_t(n * c.K + k)];
            acc -= 128 * wsum[size_t(n)];
            const float want = std::fma(float(acc), sx * sw[size_t(n)], c.bias ? bias[size_t(n)] : 0.f);
            ASSERT_EQ(out[size_t(m * ldo + n)], want)
                << "M " << c.M << " N " << c.N << " K " << c.K << " at (" << m << ", " << n << ")";
          }
          for (int64_t n = c.N; n < ldo; ++n) ASSERT_EQ(out[size_t(m * ldo + n)], -1.f) << "wrote past N";
        }
      }
  kernels::set_rows_streams_per_thread(0);
}

// Against the f32 product: with x^ = x + dx, |dx| <= sx / 2 and w^ = w + dw, |dw| <= sw / 2 (half a
// quantization step, plus the rounding of the scales, covered by the 1e-5 slack),
//   |x^ . w^ - x . w| <= sum_k (|x_k| sw/2 + |w_k| sx/2 + sx sw / 4),
// and the f32 scaling adds at most a few units of roundoff of |x^ . w^|.
TEST(Int8Gemm, WithinTheQuantizationBoundOfTheF32Product) {
  SKIP_WITHOUT_INT8();
  const int64_t M = 9, N = 300, K = 512;
  std::vector<float> w = randn_values(N * K, 71, 0.05f), x = randn_values(M * K, 72, 1.5f);
  std::vector<float> out(size_t(M * N));
  auto packed = kernels::pack_int8_weight(w.data(), N, K, K);
  kernels::gemm_int8_packed(M, x.data(), K, *packed, nullptr, out.data(), N);
  double worst = 0;
  for (int64_t m = 0; m < M; ++m) {
    float ax = 0.f;
    for (int64_t k = 0; k < K; ++k) ax = std::max(ax, std::fabs(x[size_t(m * K + k)]));
    const double sx = double(ax) / 127;
    for (int64_t n = 0; n < N; ++n) {
      float aw = 0.f;
      for (int64_t k = 0; k < K; ++k) aw = std::max(aw, std::fabs(w[size_t(n * K + k)]));
      const double sw = double(aw) / 127;
      double exact = 0, bound = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double a = x[size_t(m * K + k)], b = w[size_t(n * K + k)];
        exact += a * b;
        bound += std::fabs(a) * sw / 2 + std::fabs(b) * sx / 2 + sx * sw / 4;
        mag += std::fabs(a * b);
      }
      const double err = std::fabs(double(out[size_t(m * N + n)]) - exact);
      const double allowed = bound * (1 + 1e-5) + 4.0 / (1 << 24) * (mag + bound);
      ASSERT_LE(err, allowed) << "(" << m << ", " << n << ")";
      worst = std::max(worst, err / bound);
    }
  }
  EXPECT_GT(worst, 0.0);  // the product is quantized, not computed in f32
}

TEST(Int8Gemm, NonFiniteInputs) {
  SKIP_WITHOUT_INT8();
  std::vector<float> w = randn_values(8 * 32, 81);
  auto packed = kernels::pack_int8_weight(w.data(), 8, 32, 32);
  std::vector<float> x = randn_values(2 * 32, 82), out(16);
  x[5] = INFINITY;  // row 0
  kernels::gemm_int8_packed(2, x.data(), 32, *packed, nullptr, out.data(), 8);
  for (int n = 0; n < 8; ++n) {
    EXPECT_TRUE(std::isnan(out[size_t(n)])) << n;
    EXPECT_TRUE(std::isfinite(out[size_t(8 + n)])) << n;
  }
  w[3 * 32 + 4] = NAN;
  try {
    kernels::pack_int8_weight(w.data(), 8, 32, 32);
    FAIL() << "a NaN weight was quantized";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("weight row 3 has a non-finite value at column 4"), std::string::npos) << e.what();
  }
}

TEST(Int8Gemm, BadShapesAreClearErrors) {
  SKIP_WITHOUT_INT8();
  std::vector<float> w(64, 1.f), out(64);
  EXPECT_THROW(kernels::pack_int8_weight(w.data(), 0, 8, 8), Error);
  EXPECT_THROW(kernels::pack_int8_weight(w.data(), 8, 8, 4), Error);
  auto packed = kernels::pack_int8_weight(w.data(), 8, 8, 8);
  EXPECT_THROW(kernels::gemm_int8_packed(1, w.data(), 4, *packed, nullptr, out.data(), 8), Error);
  EXPECT_THROW(kernels::gemm_int8_packed(1, w.data(), 8, *packed, nullptr, out.data(), 7), Error);
}

// 16 rows (a batch that oneDNN's kernels take where they are exact) of a (40, 200) weight in int8:
// the output floats' bytes.
std::string int8_batch_bytes() {
  const int64_t M = 16, N = 40, K = 200;
  const std::vector<float> w = randn_values(N * K, 61, 0.05f), x = randn_values(M * K, 62, 2.f);
  std::vector<float> out(size_t(M * N));
  kernels::gemm_int8_packed(M, x.data(), K, *kernels::pack_int8_weight(w.data(), N, K, K), nullptr, out.data(), N);
  return std::string(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(float));
}

// ONEDNN_MAX_CPU_ISA=AVX512_CORE (AVX-512 without VNNI: oneDNN's int8 kernels would saturate) in a
// child process: every batch runs on qkv's own kernel. Exit 3: its outputs handed back
// (death_result.h); 2: oneDNN still claims exact kernels; 1: no file written.
[[noreturn]] void int8_with_avx512_core_cap() {
  setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE", 1);
  if (kernels::int8_native()) _exit(2);
  _exit(testing::write_death_result(int8_batch_bytes()) ? 3 : 1);
}

// ... with the bits of an uncapped run: on a VNNI CPU, oneDNN's. Nothing may touch oneDNN before
// EXPECT_EXIT: the child re-runs this test from its start, and oneDNN reads the cap once.
TEST(Int8IsaDeathTest, CpuWithoutVnniRunsQkvsKernelWithTheSameBits) {
  if (!kernels::int8_own_kernel_built()) GTEST_SKIP() << "qkv's int8 kernel is not built for SIMD here";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(int8_with_avx512_core_cap(), ::testing::ExitedWithCode(3), "");
  const std::optional<std::string> got = testing::take_death_result();
  ASSERT_TRUE(got.has_value()) << "the child left no result";
  EXPECT_TRUE(*got == int8_batch_bytes()) << "the capped run's outputs differ";
}

// The threshold rule as stated: at least int8_min_weight_elements() values.
TEST(Int8Pays, ByWeightSize) {
  EXPECT_EQ(kernels::int8_min_weight_elements(), int64_t(1) << 17);  // the default (no QKV_INT8_MIN_WEIGHT in tests)
  EXPECT_TRUE(kernels::int8_pays(2304, 768));
  EXPECT_TRUE(kernels::int8_pays(256, 1024));  // the translation model's W2
  EXPECT_TRUE(kernels::int8_pays(512, 256));   // exactly 2^17
  EXPECT_FALSE(kernels::int8_pays(511, 256));
  EXPECT_FALSE(kernels::int8_pays(256, 256));  // the translation model's attention outputs: faster in fp32
  Int8Threshold all(0);
  EXPECT_TRUE(kernels::int8_pays(1, 1));
  EXPECT_FALSE(kernels::int8_pays(0, 8));
}

// The batch rule: a weight under the threshold of at least 2^16 values pays from a batch when the
// rule is on (never when it is 0); one that pays at every batch is not "from rows".
TEST(Int8Pays, FromRowsForWeightsOfAtLeast2To16Values) {
  Int8SmallWeightRows from32(32);
  EXPECT_TRUE(kernels::int8_pays_from_rows(256, 256));
  EXPECT_TRUE(kernels::int8_pays_from_rows(511, 256));
  EXPECT_FALSE(kernels::int8_pays_from_rows(512, 256));  // pays always
  EXPECT_FALSE(kernels::int8_pays_from_rows(255, 256));  // under 2^16
  EXPECT_FALSE(kernels::int8_pays_from_rows(0, 1 << 20));
  Int8SmallWeightRows never(0);
  EXPECT_FALSE(kernels::int8_pays_from_rows(256, 256));
}

// A weight that pays only from a batch holds both forms under int8: products of fewer than
// int8_small_weight_min_rows() rows are exactly the fp32 panels' (the same panels as an fp32
// pack), from there on exactly gemm_int8_packed's; with the rule off it is packed as for fp32.
TEST(Int8Gemm, SmallWeightRunsInt8FromTheRowThreshold) {
  SKIP_WITHOUT_INT8();
  Int8SmallWeightRows from32(32);
  const int64_t N = 256, K = 256;
  Tensor w = testing::randn(Shape{N, K}, 321), b = testing::randn(Shape{N}, 322);
  const kernels::PackedLinear p = kernels::pack_linear(w, b, kernels::MatmulPrecision::int8);
  const kernels::PackedLinear f = kernels::pack_linear(w, b, kernels::MatmulPrecision::fp32);
  ASSERT_TRUE(p.int8 != nullptr);
  ASSERT_TRUE(p.panels.defined());
  EXPECT_EQ(p.precision, kernels::MatmulPrecision::int8);
  EXPECT_EQ(p.panels.to_vector<float>(), f.panels.to_vector<float>());
  for (int64_t M : {1, 8, 31, 32, 33, 64}) {
    SCOPED_TRACE(::testing::Message() << "M " << M);
    Tensor x = testing::randn(Shape{M, K}, uint64_t(330 + M));
    Tensor out = Tensor::empty({M, N}), want = Tensor::empty({M, N});
    kernels::packed_linear(x, p, out);
    if (M < 32)
      kernels::packed_linear(x, f, want);
    else
      kernels::gemm_int8_packed(M, x.data<float>(), K, *p.int8, b.data<float>(), want.data<float>(), N);
    EXPECT_EQ(out.to_vector<float>(), want.to_vector<float>());
  }
  Int8SmallWeightRows never(0);
  const kernels::PackedLinear q = kernels::pack_linear(w, b, kernels::MatmulPrecision::int8);
  EXPECT_TRUE(q.int8 == nullptr);
  EXPECT_EQ(q.precision, kernels::MatmulPrecision::fp32);
}

// pack_linear for precision int8: a weight that pays is quantized (and packed_linear is then
// exactly gemm_int8_packed, bias included); a smaller one is the fp32 panels form, the same
// panels and the same results as pack_linear for fp32.
TEST(Int8Gemm, PackLinearQuantizesOnlyWeightsThatPay) {
  SKIP_WITHOUT_INT8();
  Tensor w = testing::randn(Shape{96, 80}, 301), b = testing::randn(Shape{96}, 302), x = testing::randn(Shape{5, 80}, 303);
  {
    Int8Threshold t(96 * 80);
    kernels::PackedLinear p = kernels::pack_linear(w, b, kernels::MatmulPrecision::int8);
    ASSERT_TRUE(p.int8 != nullptr);
    EXPECT_FALSE(p.panels.defined());
    EXPECT_EQ(p.precision, kernels::MatmulPrecision::int8);
    Tensor out = Tensor::empty({5, 96}), want = Tensor::empty({5, 96});
    kernels::packed_linear(x, p, out);
    kernels::gemm_int8_packed(5, x.data<float>(), 80, *p.int8, b.data<float>(), want.data<float>(), 96);
    EXPECT_EQ(out.to_vector<float>(), want.to_vector<float>());
  }
  Int8Threshold t(96 * 80 + 1);
  kernels::PackedLinear p = kernels::pack_linear(w, b, kernels::MatmulPrecision::int8);
  kernels::PackedLinear f = kernels::pack_linear(w, b, kernels::MatmulPrecision::fp32);
  EXPECT_TRUE(p.int8 == nullptr);
  EXPECT_EQ(p.precision, kernels::MatmulPrecision::fp32);
  ASSERT_TRUE(p.panels.defined());
  EXPECT_EQ(p.panels.to_vector<float>(), f.panels.to_vector<float>());
  Tensor out = Tensor::empty({5, 96}), want = Tensor::empty({5, 96});
  kernels::packed_linear(x, p, out);
  kernels::packed_linear(x, f, want);
  EXPECT_EQ(out.to_vector<float>(), want.to_vector<float>());
}

}  // namespace
}  // namespace qkv
