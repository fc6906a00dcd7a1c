#include "qkv/tensor/tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "qkv/tensor/rng.h"
#include "ref.h"

using namespace qkv;

// Known-answer vectors from the Random123 distribution (kat_vectors, philox4x32_10).
TEST(Philox, KnownAnswers) {
  auto a = philox4x32(0, 0, 0);
  EXPECT_EQ(a[0], 0x6627e8d5u); EXPECT_EQ(a[1], 0xe169c58du); EXPECT_EQ(a[2], 0xbc57ac4cu); EXPECT_EQ(a[3], 0x9b00dbd8u);
  auto b = philox4x32(0xffffffffffffffffull, 0xffffffffffffffffull, 0xffffffffffffffffull);
  EXPECT_EQ(b[0], 0x408f276du); EXPECT_EQ(b[1], 0x41c83b0eu); EXPECT_EQ(b[2], 0xa20bc7c6u); EXPECT_EQ(b[3], 0x6d5451fdu);
  // counter (243f6a88 85a308d3 13198a2e 03707344), key (a4093822 299f31d0)
  auto c = philox4x32(0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a88ull);
  EXPECT_EQ(c[0], 0xd16cfe09u); EXPECT_EQ(c[1], 0x94fdccebu); EXPECT_EQ(c[2], 0x5001e420u); EXPECT_EQ(c[3], 0x24126ea1u);
}

// The batched generator (16 blocks per step, or two steps of 8 on AVX2; the counters' low words
// formed as vectors when they do not wrap inside a step) gives every block what philox4x32 gives
// it: across the low word's wrap, across the 64-bit counter's wrap, and for counts that end
// inside a batch.
TEST(Philox, BlocksEqualOneAtATime) {
  const uint64_t key = 0x299f31d0a4093822ull, hi = 0x0370734413198a2eull;
  for (uint64_t lo : {uint64_t(0), uint64_t(0x85a308d3243f6a88ull), uint64_t(0xFFFFFFF9ull),
                      uint64_t(0x1FFFFFFF0ull), uint64_t(0xFFFFFFF5ull),
                      uint64_t(0xFFFFFFFFFFFFFFF5ull)})
    for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 24, 40}) {  // AVX2 runs a batch as two halves of 8
      std::vector<uint32_t> got(size_t(4 * n));
      philox4x32_blocks(key, hi, lo, n, got.data());
      for (int64_t b = 0; b < n; ++b) {
        auto want = philox4x32(key, hi, lo + uint64_t(b));
        for (int j = 0; j < 4; ++j)
          ASSERT_EQ(got[size_t(4 * b + j)], want[size_t(j)]) << std::hex << "lo " << lo << " n " << n << " block " << b;
      }
    }
}

TEST(Generator, SameSeedSameBitsAndMoments) {
  Generator g1(42), g2(42);
  std::vector<float> a(100001), b(100001);
  g1.normal(a.data(), int64_t(a.size()));
  g2.normal(b.data(), int64_t(b.size()));
  EXPECT_EQ(a, b);
  double m = 0, v = 0;
  for (float x : a) m += x;
  m /= double(a.size());
  for (float x : a) v += (x - m) * (x - m);
  v /= double(a.size());
  EXPECT_NEAR(m, 0.0, 0.01);
  EXPECT_NEAR(v, 1.0, 0.02);
  // A second draw continues the stream rather than repeating it.
  g1.normal(b.data(), int64_t(b.size()));
  EXPECT_NE(a, b);
}

TEST(Tensor, ViewsShareStorageAndCopiesDoNot) {
  Tensor t = Tensor::arange(24, DType::f32);
  Tensor v = t.as_strided({4, 3}, {1, 4}, 0);  // a transposed view of a (3, 4) matrix
  EXPECT_FALSE(v.is_contiguous());
  EXPECT_EQ(v.storage(), t.storage());
  std::vector<float> got = v.to_vector<float>();
  EXPECT_EQ(got[1], 4.f);
  EXPECT_EQ(got[3], 1.f);
  Tensor c = v.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_NE(c.storage(), t.storage());
  EXPECT_EQ(c.to_vector<float>(), got);
}

TEST(Tensor, ErrorsNameTheProblem) {
  EXPECT_THROW(Tensor::zeros({2, 3}).data<int64_t>(), Error);
  EXPECT_THROW(Tensor::zeros({2, 3}).item(), Error);
  EXPECT_THROW(Tensor::zeros({2, 3}).as_strided({3, 3}, {3, 1}, 0), Error);
  EXPECT_THROW(Shape({1, 2, 3, 4, 5, 6, 7}), Error);
  // bf16 is storage for weights held in bf16 (nn::hold_in_bf16): made, widened, copied; not filled
  // or rounded into here (rounding is kernels::to_bf16's).
  const Tensor b = Tensor::zeros({2}, DType::bf16);
  EXPECT_EQ(b.to(DType::f32).to_vector<float>(), std::vector<float>({0.f, 0.f}));
  EXPECT_THROW(Tensor::ones({2}, DType::bf16), Error);
  EXPECT_THROW(Tensor::zeros({2}).to(DType::bf16), Error);
  EXPECT_THROW(b.to(DType::i64), Error);
}

// Extents whose product, or whose byte count, does not fit: an error naming the shape. The byte
// count wrapped (4 * (2^62 + 2) = 8 bytes allocated) and ones() wrote 2^62 floats past them; a
// numel() that wrapped to 0 made a (2^40, 2^40) tensor "empty".
// A floating value that an integer dtype cannot hold (NaN, an infinity, out of range) is an error:
// the conversion is undefined behaviour (x86 gave INT64_MIN).
TEST(Tensor, FloatsThatAnIntegerCannotHoldAreErrors) {
  const double nan = std::nan("");
  EXPECT_THROW(Tensor::full({2}, nan, DType::i64), Error);
  EXPECT_THROW(Tensor::full({2}, 1e19, DType::i64), Error);
  EXPECT_THROW(Tensor::full({2}, 256, DType::u8), Error);
  EXPECT_THROW(Tensor::full({2}, -1, DType::u8), Error);
  EXPECT_EQ(Tensor::full({2}, -9.0e18, DType::i64).to_vector<int64_t>()[0], int64_t(-9000000000000000000));
  Tensor f = Tensor::from_vector<float>({1.5f, std::nanf("")}, {2});
  EXPECT_THROW(f.to(DType::i64), Error);
  EXPECT_THROW(Tensor::from_vector<float>({1.f, 3e9f, 2.f}, {3}).as_strided({2}, {1}, 1).to(DType::i32), Error);
  EXPECT_EQ(Tensor::from_vector<float>({-2.7f, 3.9f}, {2}).to(DType::i64).to_vector<int64_t>(),
            std::vector<int64_t>({-2, 3}));  // truncation toward zero, as static_cast and torch
  EXPECT_EQ(f.to(DType::boolean).to(DType::i64).to_vector<int64_t>(), std::vector<int64_t>({1, 1}));  // NaN: nonzero
}

TEST(Tensor, ShapesTooLargeToCountOrAllocateAreErrors) {
  const int64_t big = int64_t(1) << 62;
  for (const Shape& s : {Shape{big + 2}, Shape{int64_t(1) << 40, int64_t(1) << 40}, Shape{big, 4, 1}}) {
    SCOPED_TRACE(s.str());
    try {
      Tensor::ones(s);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(s.str()), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(Shape({int64_t(1) << 40, int64_t(1) << 40}).numel(), Error);
  EXPECT_EQ(Shape({int64_t(1) << 40, int64_t(1) << 40, 0}).numel(), 0);  // no product overflows: nothing to count
  EXPECT_EQ(Tensor::empty({int64_t(1) << 40, int64_t(1) << 40, 0}).numel(), 0);
  EXPECT_THROW(Tensor::empty({int64_t(1) << 61}, DType::f64), Error);  // 2^64 bytes
  EXPECT_THROW(Tensor::empty({big}), Error);                           // 2^64 bytes of f32
}
