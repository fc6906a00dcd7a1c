// ops/dropout: statistics, the counter-based mask (seed + offset -> bits, any thread count),
// backward reuses the mask, eval / p = 0 are the identity, errors.
#include "qkv/ops/dropout.h"

#include <gtest/gtest.h>

#include <cmath>

#include "gradcheck.h"
#include "helpers.h"
#include "qkv/autograd/node.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

TEST(Dropout, FractionDroppedAndScale) {
  const double p = 0.3;
  Tensor x = Tensor::full({1000, 200}, 2.0);
  Generator gen(7);
  Tensor y = dropout(x, p, true, gen);
  std::vector<float> yv = y.to_vector<float>();
  int64_t dropped = 0;
  for (float v : yv) {
    if (v == 0.f) ++dropped;
    else EXPECT_FLOAT_EQ(v, float(2.0 / (1.0 - p)));
  }
  // Binomial(200000, 0.3): sd ~ 205 drops; 5 sd either side.
  double n = double(yv.size());
  EXPECT_NEAR(double(dropped), p * n, 5 * std::sqrt(n * p * (1 - p)));
  EXPECT_EQ(gen.offset(), uint64_t(200000 / 4));  // reserved one counter per 4 elements
}

TEST(Dropout, MaskIsPhiloxCounterStreamIndependentOfThreads) {
  const double p = 0.5;
  Tensor x = randn({257, 301}, 51);  // odd sizes: the last Philox block is partial
  auto run = [&](int threads) {
    ThreadGuard guard(threads);
    Generator gen(99);
    gen.reserve(40);  // a non-zero starting counter (offset 10 blocks)
    return dropout(x, p, true, gen);
  };
  Tensor y1 = run(1), y2 = run(2);
  EXPECT_TRUE(bit_equal(y1, y2));
  // Independent check of the documented rule: element i kept iff lane i%4 of
  // philox4x32(seed, 0, 10 + i/4), as a unit float, is >= p.
  std::vector<float> xv = x.to_vector<float>(), yv = y1.to_vector<float>();
  int64_t mismatches = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    auto r = philox4x32(99, 0, 10 + i / 4);
    bool keep = u32_to_unit_float(r[i % 4]) >= float(p);
    float expect = keep ? xv[i] * 2.0f : 0.0f;
    if (yv[i] != expect) ++mismatches;
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(Dropout, SameSeedSameMaskNextCallDiffers) {
  Tensor x = Tensor::ones({64, 64});
  Generator a(5), b(5);
  Tensor ya = dropout(x, 0.2, true, a), yb = dropout(x, 0.2, true, b);
  EXPECT_TRUE(bit_equal(ya, yb));
  Tensor ya2 = dropout(x, 0.2, true, a);  // the generator advanced
  EXPECT_FALSE(bit_equal(ya, ya2));
}

TEST(Dropout, BackwardUsesTheSameMask) {
  Tensor x = randn({33, 17}, 52);
  x.set_requires_grad(true);
  Generator gen(3);
  Tensor y = dropout(x, 0.4, true, gen);
  Tensor gy = randn({33, 17}, 53);
  backward(y, gy);
  std::vector<float> yv = y.to_vector<float>(), xv = x.to_vector<float>(), gv = gy.to_vector<float>(),
                     gx = x.grad().to_vector<float>();
  for (size_t i = 0; i < yv.size(); ++i) {
    bool kept = yv[i] != 0.f || xv[i] == 0.f;
    EXPECT_FLOAT_EQ(gx[i], kept ? gv[i] / 0.6f : 0.f) << i;
  }
  // f64 finite differences with a fixed generator state per evaluation (same mask each time).
  Tensor x64 = randn({4, 5}, 54, DType::f64);
  EXPECT_GRADCHECK(
      [](const std::vector<Tensor>& in) {
        Generator g(11);
        return dropout(in[0], 0.5, true, g);
      },
      {x64});
}

TEST(Dropout, EvalAndZeroPAreIdentity) {
  Tensor x = randn({10, 10}, 55);
  Generator gen(1);
  EXPECT_TRUE(dropout(x, 0.5, false, gen).same(x));
  EXPECT_TRUE(dropout(x, 0.0, true, gen).same(x));
  EXPECT_EQ(gen.offset(), 0u);  // no random numbers consumed
}

TEST(Dropout, BadInputsThrowNamingTheOp) {
  Tensor x = Tensor::ones({3});
  for (double p : {1.0, -0.1, 1.5}) {
    try {
      dropout(x, p, true);
      ADD_FAILURE() << "expected an error for p = " << p;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("dropout"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("[0, 1)"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(dropout(Tensor::ones({3}, DType::i64), 0.5, true), Error);
}
