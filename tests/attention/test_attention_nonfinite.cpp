// NaN and infinite inputs spread through attention and softmax as they do in torch (NaN outputs,
// NaN gradients), on the fused kernel and the naive path alike. The fused kernel turned them into
// zeros: a row whose running sum was NaN took the fully-masked branch, and a row of NaN scores
// alone looked fully masked (its maximum came out -inf), so a diverged model's NaN vanished and
// the trainer's non-finite check never saw it. Fully masked rows keep their documented zeros.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "qkv/attention/sdpa.h"
#include "qkv/autograd/node.h"
#include "qkv/ops/softmax.h"

using namespace qkv;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor ramp(const Shape& s, float step, float offset) {
  Tensor t = Tensor::empty(s);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = std::sin(float(i) * step + offset);
  return t;
}

// Which of the (Tq) query rows of out (1, 1, Tq, Dv) are entirely NaN / entirely finite.
std::vector<char> nan_rows(const Tensor& out) {
  const std::vector<float> o = out.to_vector<float>();
  const int64_t Tq = out.size(2), Dv = out.size(3);
  std::vector<char> r(size_t(Tq), 0);
  for (int64_t i = 0; i < Tq; ++i) {
    bool all_nan = true, all_finite = true;
    for (int64_t c = 0; c < Dv; ++c) {
      all_nan &= std::isnan(o[size_t(i * Dv + c)]);
      all_finite &= std::isfinite(o[size_t(i * Dv + c)]);
    }
    EXPECT_TRUE(all_nan || all_finite) << "row " << i << " is partly NaN";
    r[size_t(i)] = all_nan;
  }
  return r;
}

struct Case {
  const char* name;
  int which;  // 0: q, 1: k, 2: additive mask
  int64_t row, col;
  float value;
  std::vector<char> want;  // the NaN rows of (Tq = 3)
};

}  // namespace

TEST(AttentionNonFinite, NanAndInfSpreadOnTheFusedAndNaivePaths) {
  const Case cases[] = {
      {"NaN key: every query reads it", 1, 1, 2, kNaN, {1, 1, 1}},
      {"+inf in query 0: inf - inf in its softmax", 0, 0, 0, kInf, {1, 0, 0}},
      {"NaN in the additive mask at (0, 2)", 2, 0, 2, kNaN, {1, 0, 0}},
  };
  for (const Case& c : cases)
    for (bool naive : {false, true}) {
      SCOPED_TRACE(std::string(c.name) + (naive ? ", naive" : ", fused"));
      Tensor q = ramp({1, 1, 3, 4}, 0.7f, 0.1f), k = ramp({1, 1, 3, 4}, 0.9f, 0.3f), v = ramp({1, 1, 3, 4}, 0.5f, 0.2f);
      AttentionMask m;
      m.mask = Tensor::zeros({1, 1, 3, 3});
      Tensor& target = c.which == 0 ? q : c.which == 1 ? k : m.mask;
      target.data<float>()[c.row * target.size(3) + c.col] = c.value;
      for (Tensor* t : {&q, &k, &v}) t->set_requires_grad(true);
      SdpaResult r = scaled_dot_product_attention(q, k, v, m, 0.0, false, naive);
      EXPECT_EQ(nan_rows(r.out), c.want);
      backward(r.out, Tensor::ones({1, 1, 3, 4}));
      bool grad_nan = false;
      for (float g : v.grad().to_vector<float>()) grad_nan |= std::isnan(g);
      EXPECT_TRUE(grad_nan) << "the gradient lost the NaN";
    }
  // A NaN scale: every score NaN, rows that were all NaN alone (they looked fully masked).
  for (bool naive : {false, true}) {
    SdpaResult r = scaled_dot_product_attention(ramp({1, 1, 3, 4}, 0.7f, 0.1f), ramp({1, 1, 5, 4}, 0.9f, 0.3f),
                                                ramp({1, 1, 5, 4}, 0.5f, 0.2f), {}, 0.0, false, naive, kNaN);
    EXPECT_EQ(nan_rows(r.out), std::vector<char>({1, 1, 1})) << (naive ? "naive" : "fused");
  }
  // A fully masked row (query 1 sees no key) is still zeros, beside a NaN row.
  for (bool naive : {false, true}) {
    AttentionMask m;
    m.mask = Tensor::zeros({1, 1, 3, 3});
    float* mp = m.mask.data<float>();
    mp[3] = mp[4] = mp[5] = -kInf;  // row 1
    mp[0] = kNaN;                   // row 0
    SdpaResult r = scaled_dot_product_attention(ramp({1, 1, 3, 4}, 0.7f, 0.1f), ramp({1, 1, 3, 4}, 0.9f, 0.3f),
                                                ramp({1, 1, 3, 4}, 0.5f, 0.2f), m, 0.0, false, naive);
    EXPECT_EQ(nan_rows(r.out), std::vector<char>({1, 0, 0})) << (naive ? "naive" : "fused");
    const std::vector<float> o = r.out.to_vector<float>();
    for (int c = 0; c < 4; ++c) EXPECT_EQ(o[size_t(4 + c)], 0.f) << (naive ? "naive" : "fused");
  }
}

// softmax and log_softmax: a row of NaNs gives NaNs (it gave 0 and -inf, as a fully masked row
// does); a row of -inf is still fully masked: 0 and -inf.
TEST(AttentionNonFinite, SoftmaxOfANanRowIsNan) {
  Tensor x = Tensor::empty({3, 4});
  const std::vector<float> rows = {kNaN, kNaN, kNaN, kNaN, -kInf, -kInf, -kInf, -kInf, 1, kNaN, 2, 3};
  std::copy(rows.begin(), rows.end(), x.data<float>());
  for (bool log : {false, true}) {
    SCOPED_TRACE(log ? "log_softmax" : "softmax");
    const std::vector<float> y = (log ? log_softmax(x) : softmax(x)).to_vector<float>();
    for (int c = 0; c < 4; ++c) {
      EXPECT_TRUE(std::isnan(y[size_t(c)])) << c;
      EXPECT_EQ(y[size_t(4 + c)], log ? -kInf : 0.f) << c;
      EXPECT_TRUE(std::isnan(y[size_t(8 + c)])) << c;
    }
  }
}
