// Initialisation schemes (statistical checks against their definitions) and positional encodings
// (against the PyTorch tutorial's formula, tools/refs/nn_layers.py).
#include <gtest/gtest.h>

#include <cmath>

#include "qkv/autograd/node.h"
#include "qkv/nn/init.h"
#include "qkv/nn/layers.h"
#include "qkv/nn/positional.h"
#include "qkv/ops/shape.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

struct Stats {
  double mean, var, min, max;
};

Stats stats(const Tensor& t) {
  std::vector<double> v = t.to_vector<double>();
  double s = 0, s2 = 0, lo = v[0], hi = v[0];
  for (double x : v) {
    s += x;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  double mean = s / double(v.size());
  for (double x : v) s2 += (x - mean) * (x - mean);
  return {mean, s2 / double(v.size()), lo, hi};
}

}  // namespace

TEST(Init, XavierUniformBoundAndVariance) {
  // Glorot & Bengio: U(-a, a), a = sqrt(6 / (fan_in + fan_out)); variance a^2 / 3.
  Generator g(7);
  Tensor w = Tensor::empty({300, 200});
  nn::init::xavier_uniform(w, 1.0, g);
  const double a = std::sqrt(6.0 / 500.0);
  Stats s = stats(w);
  const double n = 60000;
  EXPECT_GE(s.min, -a);
  EXPECT_LE(s.max, a);
  EXPECT_GT(s.max, 0.999 * a);  // the bound is reached, not a narrower one
  EXPECT_LT(s.min, -0.999 * a);
  EXPECT_NEAR(s.mean, 0.0, 5 * a / std::sqrt(3 * n));
  EXPECT_NEAR(s.var, a * a / 3, 0.02 * a * a / 3);  // sd of the variance estimate ~0.5%
  Tensor w2 = Tensor::empty({300, 200});
  nn::init::xavier_uniform(w2, 2.0, g);
  EXPECT_GT(stats(w2).max, 1.99 * a);  // gain scales the bound
}

TEST(Init, Normal002Moments) {
  Generator g(8);
  nn::Linear lin(256, 512, true, nn::init::Scheme::normal_002);
  Tensor w = Tensor::empty({512, 256});
  nn::init::normal(w, 0.0, 0.02, g);
  for (const Tensor& t : {w, lin.weight}) {
    Stats s = stats(t);
    const double n = double(t.numel());
    EXPECT_NEAR(s.mean, 0.0, 5 * 0.02 / std::sqrt(n));
    EXPECT_NEAR(std::sqrt(s.var), 0.02, 0.02 * 0.02);  // sd of the sd estimate ~0.2%
    EXPECT_GT(s.max, 3 * 0.02);                        // Gaussian tails, not a uniform
  }
  EXPECT_EQ(stats(lin.bias).max, 0.0);  // biases zero
  EXPECT_EQ(stats(lin.bias).min, 0.0);
}

TEST(Init, PyTorchDefaultBounds) {
  // nn.Linear: weight kaiming_uniform(a=sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)), bias U(same bound).
  nn::Linear lin(400, 300);
  const double a = 1.0 / std::sqrt(400.0);
  Stats w = stats(lin.weight), b = stats(lin.bias);
  EXPECT_GE(w.min, -a);
  EXPECT_LE(w.max, a);
  EXPECT_GT(w.max, 0.999 * a);
  EXPECT_NEAR(w.var, a * a / 3, 0.03 * a * a / 3);
  EXPECT_GE(b.min, -a);
  EXPECT_LE(b.max, a);
  EXPECT_GT(b.max - b.min, a);  // spread over the interval, not zero
  // nn.Embedding: N(0, 1).
  nn::Embedding emb(1000, 64);
  Stats e = stats(emb.weight);
  EXPECT_NEAR(e.mean, 0.0, 5.0 / std::sqrt(64000.0));
  EXPECT_NEAR(e.var, 1.0, 0.03);
}

TEST(Init, InitializeWalksTheTreeAndKeepsPaddingZero) {
  class Net : public nn::Module {
   public:
    Net() {
      emb = register_module("emb", std::make_shared<nn::Embedding>(50, 32, 3));
      ffn = register_module("ffn", std::make_shared<nn::PositionwiseFFN>(32, 64, nn::Activation::relu, 0.0));
    }
    std::shared_ptr<nn::Embedding> emb;
    std::shared_ptr<nn::PositionwiseFFN> ffn;
  } net;
  Generator g(9);
  nn::initialize(net, nn::init::Scheme::xavier_uniform, g);
  const double a = std::sqrt(6.0 / (32 + 64));
  Stats w = stats(net.ffn->fc1->weight);
  EXPECT_LE(w.max, a);
  EXPECT_GT(w.max, 0.95 * a);
  EXPECT_EQ(stats(net.ffn->fc1->bias).max, 0.0);
  std::vector<float> e = net.emb->weight.to_vector<float>();
  for (int j = 0; j < 32; ++j) EXPECT_EQ(e[size_t(3 * 32 + j)], 0.f);
  EXPECT_NE(e[0], 0.f);
  // Same seed, same parameters.
  Net other;
  Generator g2(9);
  nn::initialize(other, nn::init::Scheme::xavier_uniform, g2);
  EXPECT_TRUE(bit_equal(other.ffn->fc2->weight, net.ffn->fc2->weight));
}

TEST(Positional, SinusoidTableMatchesTheTutorialFormula) {
  RefFile ref("nn_layers");
  int n = 0;
  for (auto& c : ref.cases()) {
    if (c.rfind("sinusoid_", 0) != 0) continue;
    SCOPED_TRACE(c);
    auto p = ref.params(c);
    int64_t L = p["max_len"], d = p["d"];
    nn::SinusoidalPositionalEncoding inter(d, L), halves(d, L, nn::SinusoidLayout::halves);
    // The formula evaluated in f64 and rounded once: f32 tolerance.
    EXPECT_CLOSE(inter.table(), ref.get(c, "interleaved"), kF32);
    EXPECT_CLOSE(halves.table(), ref.get(c, "halves"), kF32);
    // The tutorial's own f32 code rounds pos * div_term in f32: its angle error grows like
    // pos * 2^-24, so compare with atol = max_len * 1.2e-7 (at most 1.5e-5 here).
    EXPECT_CLOSE(inter.table(), ref.get(c, "interleaved_f32_tutorial"), (Tol{0, double(L) * 1.2e-7}));
    EXPECT_TRUE(inter.state_dict().empty());  // recomputed, never saved
    ++n;
  }
  EXPECT_EQ(n, 3);
  EXPECT_THROW(nn::SinusoidalPositionalEncoding(7, 10), Error);  // odd d_model
}

TEST(Positional, SinusoidForwardAddsTheRowsAtAnOffset) {
  nn::SinusoidalPositionalEncoding pe(8, 20);
  Tensor x = randn({2, 3, 8}, 4);
  Tensor y = pe.forward(x, 5);
  std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>(), t = pe.table().to_vector<float>();
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 8; ++j)
        EXPECT_EQ(yv[size_t((b * 3 + i) * 8 + j)], xv[size_t((b * 3 + i) * 8 + j)] + t[size_t((5 + i) * 8 + j)]);
  EXPECT_THROW(pe.forward(x, 18), Error);  // positions 18..20 exceed max_len 20
}

TEST(Positional, LearnedAddsTrainableRows) {
  nn::LearnedPositionalEmbedding pe(10, 4);
  Tensor x = randn({2, 3, 4}, 5);
  Tensor y = pe.forward(x, 2);
  std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>(), w = pe.weight.to_vector<float>();
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j)
        EXPECT_EQ(yv[size_t((b * 3 + i) * 4 + j)], xv[size_t((b * 3 + i) * 4 + j)] + w[size_t((2 + i) * 4 + j)]);
  backward(y, Tensor::ones({2, 3, 4}));
  std::vector<float> g = pe.weight.grad().to_vector<float>();
  for (int r = 0; r < 10; ++r)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(g[size_t(r * 4 + j)], (r >= 2 && r < 5) ? 2.f : 0.f);  // summed over B
  EXPECT_EQ(pe.state_dict().count("weight"), 1u);
}
