// Bahdanau, Luong, RoPE and Shaw relative attention vs PyTorch (tools/refs/attention_classic.py).
#include <gtest/gtest.h>

#include <cmath>

#include "gradcheck.h"
#include "param_grads.h"
#include "qkv/attention/positions.h"
#include "qkv/attention/rnn_attention.h"
#include "qkv/autograd/node.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/matmul.h"
#include "qkv/ops/reduce.h"
#include "qkv/ops/shape.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::attention;
using namespace qkv::testing;

namespace {

// Loads "p.<name>" tensors of case c into m (strict: every parameter must be given).
void load_params(nn::Module& m, const RefFile& ref, const std::string& c) {
  std::map<std::string, Tensor> sd;
  for (auto& [name, t] : m.state_dict()) sd[name] = ref.get(c, "p." + name);
  m.load_state_dict(sd);
}

// The scalar sum(a * ga) + sum(b * gb), whose gradients the references store.
Tensor project2(const Tensor& a, const Tensor& ga, const Tensor& b, const Tensor& gb) {
  return add(sum(mul(a, ga)), sum(mul(b, gb)));
}

std::unique_ptr<RnnAttention> make_rnn_attention(const std::string& kind, int64_t Ds, int64_t Dh, int64_t A,
                                                 int64_t M) {
  if (kind == "bahdanau_concat") return std::make_unique<BahdanauAttention>(Ds, Dh, A, AdditiveForm::concat);
  if (kind == "bahdanau_sum") return std::make_unique<BahdanauAttention>(Ds, Dh, A, AdditiveForm::sum);
  if (kind == "luong_dot") return std::make_unique<LuongAttention>(Ds, Ds, LuongScore::dot);
  if (kind == "luong_general") return std::make_unique<LuongAttention>(Ds, Dh, LuongScore::general);
  if (kind == "luong_location") return std::make_unique<LuongAttention>(Ds, Dh, LuongScore::location, 0, M);
  return std::make_unique<LuongAttention>(Ds, Dh, LuongScore::concat, A);
}

}  // namespace

TEST(RnnAttention, BahdanauAndLuongMatchPyTorch) {
  RefFile ref("attention_classic");
  int n = 0;
  for (const auto& c : ref.cases()) {
    auto p = ref.params(c);
    if (!p.contains("kind")) continue;
    SCOPED_TRACE(c);
    auto att = make_rnn_attention(p["kind"], p["Ds"], p["Dh"], p["A"], p["M"]);
    load_params(*att, ref, c);
    Tensor q = ref.get(c, "query"), keys = ref.get(c, "keys");
    q.set_requires_grad(true);
    keys.set_requires_grad(true);
    Alignment a = att->forward(q, keys, ref.get(c, "pad"));
    EXPECT_CLOSE(a.context, ref.get(c, "context"), kF32);
    EXPECT_CLOSE(a.weights, ref.get(c, "weights"), kF32);
    backward(project2(a.context, ref.get(c, "g_context"), a.weights, ref.get(c, "g_weights")));
    EXPECT_CLOSE(q.grad(), ref.get(c, "g_query"), kF32);
    EXPECT_CLOSE(keys.grad(), ref.get(c, "g_keys"), kF32);
    expect_param_grads(*att, ref, c, kF32);  // location: W_a's rows beyond S get exactly 0 in torch
    ++n;
  }
  EXPECT_EQ(n, 6);
}

TEST(RnnAttention, PaddingGetsZeroWeightAndBadShapesThrow) {
  LuongAttention att(4, 4, LuongScore::dot);
  Tensor q = randn({2, 4}, 1), keys = randn({2, 3, 4}, 2);
  Tensor pad = Tensor::from_vector(std::vector<uint8_t>{0, 0, 1, 0, 1, 1}, Shape{2, 3});
  Alignment a = att.forward(q, keys, pad);
  std::vector<float> w = a.weights.to_vector<float>();
  EXPECT_EQ(w[2], 0.f);
  EXPECT_EQ(w[4], 0.f);
  EXPECT_EQ(w[5], 0.f);
  EXPECT_FLOAT_EQ(w[3], 1.f);
  EXPECT_THROW(LuongAttention(4, 5, LuongScore::dot), Error);  // dot needs equal widths
  EXPECT_THROW(att.forward(randn({2, 5}, 3), keys, pad), Error);
  EXPECT_THROW(att.forward(q, randn({2, 3, 5}, 4), pad), Error);
}

TEST(RnnAttention, LocationScoresUpToMaxPositionsAndNamesTheLimit) {
  // W_a (3, Ds): a 3-long source is scored, a 4-long one is refused naming max_positions.
  LuongAttention att(4, 6, LuongScore::location, 0, 3);
  EXPECT_EQ(att.attn->weight.shape(), Shape({3, 4}));
  EXPECT_FALSE(att.attn->bias.defined());
  Tensor q = randn({2, 4}, 1);
  Tensor pad = Tensor::from_vector(std::vector<uint8_t>{0, 0, 1, 0, 0, 0}, Shape{2, 3});
  Alignment a = att.forward(q, randn({2, 3, 6}, 2), pad);
  EXPECT_EQ(a.weights.to_vector<float>()[2], 0.f);  // padding
  try {
    att.forward(q, randn({2, 4, 6}, 3), Tensor());
    ADD_FAILURE() << "a source longer than max_positions was accepted";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("max_positions = 3"), std::string::npos) << m;
    EXPECT_NE(m.find("has 4"), std::string::npos) << m;
  }
  EXPECT_THROW(LuongAttention(4, 6, LuongScore::location), Error);  // no positions
  EXPECT_EQ(parse_luong_score("location"), LuongScore::location);
  EXPECT_STREQ(luong_score_name(LuongScore::location), "location");
}

TEST(Rope, MatchesPyTorchBothStyles) {
  RefFile ref("attention_classic");
  int n = 0;
  for (const auto& c : ref.cases()) {
    auto p = ref.params(c);
    if (!p.contains("style")) continue;
    SCOPED_TRACE(c);
    Tensor x = ref.get(c, "x");
    x.set_requires_grad(true);
    Tensor y = apply_rope(x, p["offset"], 10000.0, p["style"] == "half" ? RopeStyle::half : RopeStyle::interleaved);
    EXPECT_CLOSE(y, ref.get(c, "y"), kF32);
    backward(y, ref.get(c, "gy"));
    EXPECT_CLOSE(x.grad(), ref.get(c, "gx"), kF32);
    ++n;
  }
  EXPECT_EQ(n, 4);
}

TEST(Rope, ScoresDependOnlyOnRelativePosition) {
  // q . k after rotation at positions (i, j) equals that at (i + s, j + s).
  Tensor q = randn({1, 1, 1, 8}, 5, DType::f64), k = randn({1, 1, 1, 8}, 6, DType::f64);
  auto dot = [&](int64_t i, int64_t j) {
    std::vector<double> a = apply_rope(q, i).to_vector<double>(), b = apply_rope(k, j).to_vector<double>();
    double s = 0;
    for (size_t t = 0; t < a.size(); ++t) s += a[t] * b[t];
    return s;
  };
  EXPECT_NEAR(dot(3, 1), dot(10, 8), 1e-12);
  EXPECT_NEAR(dot(0, 5), dot(20, 25), 1e-12);
}

TEST(RelativeAttention, MatchesPyTorch) {
  RefFile ref("attention_classic");
  int n = 0;
  for (const auto& c : ref.cases()) {
    auto p = ref.params(c);
    if (!p.contains("k")) continue;
    SCOPED_TRACE(c);
    Tensor x = ref.get(c, "x");
    int64_t D = x.size(2), Tq = p["Tq"], Tk = x.size(1);
    RelativeMultiHeadAttention att(D, p["heads"], p["k"]);
    load_params(att, ref, c);
    x.set_requires_grad(true);
    Tensor xq = Tq == Tk ? x : slice(x, 1, Tk - Tq, Tk);
    AttentionMask m;
    m.causal = p["causal"];
    if (ref.has(c, "pad")) m.key_padding = ref.get(c, "pad");
    auto o = att.forward(xq, x, x, m);
    // Sums over Tk * Dh terms and two matmuls: kF32 holds (checked), no factor needed.
    EXPECT_CLOSE(o.out, ref.get(c, "out"), kF32);
    EXPECT_CLOSE(o.weights, ref.get(c, "weights"), kF32);
    backward(project2(o.out, ref.get(c, "g_out"), o.weights, ref.get(c, "g_weights")));
    EXPECT_CLOSE(x.grad(), ref.get(c, "g_x"), kF32);
    expect_param_grads(att, ref, c, kF32);
    ++n;
  }
  EXPECT_EQ(n, 3);
}

TEST(RelativeAttention, PositionTermGradcheckF64) {
  // q_i . aK[clip(j - i)]: the gather of rel_k and the per-position batched matmul, by finite
  // differences in f64 (q (B=1, H=2, T=3, Dh=2), rel_k (2k+1 = 3, Dh = 2)).
  RelativeMultiHeadAttention att(4, 2, 1);
  Tensor rk = randn({3, 2}, 10, DType::f64), q = randn({1, 2, 3, 2}, 11, DType::f64);
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& in) {
        Tensor idx = reshape(att.distance_index(3, 3), {-1});
        Tensor ak = reshape(index_select(in[1], 0, idx), {3, 3, 2});    // (Tq, Tk, Dh)
        Tensor qp = reshape(permute(in[0], {2, 0, 1, 3}), {3, 2, 2});    // (Tq, BH, Dh)
        return matmul(qp, transpose(ak, 1, 2));                         // (Tq, BH, Tk)
      },
      {q, rk});
}
