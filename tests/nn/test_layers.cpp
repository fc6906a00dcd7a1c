// nn layers against PyTorch (tools/refs/nn_layers.py): Linear, Embedding, LayerNorm, PositionwiseFFN
// forward + all gradients; Dropout statistics; saving and reloading gives bit-identical outputs.
#include "qkv/nn/layers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "qkv/autograd/node.h"
#include "qkv/ops/elementwise.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

void set(Tensor dst, const Tensor& src) {
  NoGradGuard ng;
  dst.copy_from(src);
}

}  // namespace

TEST(Linear, MatchesPyTorch) {
  RefFile ref("nn_layers");
  int n = 0;
  for (auto& c : ref.cases()) {
    if (c.rfind("linear_", 0) != 0) continue;
    SCOPED_TRACE(c);
    bool bias = ref.params(c)["bias"];
    Tensor x = ref.get(c, "x"), w = ref.get(c, "w");
    nn::Linear lin(w.size(1), w.size(0), bias);
    set(lin.weight, w);
    if (bias) set(lin.bias, ref.get(c, "b"));
    x.set_requires_grad(true);
    Tensor y = lin.forward(x);
    EXPECT_CLOSE(y, ref.get(c, "y"), kF32);
    backward(y, ref.get(c, "gy"));
    EXPECT_CLOSE(x.grad(), ref.get(c, "gx"), kF32);
    EXPECT_CLOSE(lin.weight.grad(), ref.get(c, "gw"), kF32);
    if (bias) {
      EXPECT_CLOSE(lin.bias.grad(), ref.get(c, "gb"), kF32);
    }
    EXPECT_EQ(lin.named_parameters().size(), bias ? 2u : 1u);
    ++n;
  }
  EXPECT_EQ(n, 4);
}

TEST(Linear, WrongInputWidthNamesShapes) {
  nn::Linear lin(4, 3);
  try {
    lin.forward(Tensor::zeros({2, 5}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("(2, 5)"), std::string::npos) << m;
  }
}

TEST(Embedding, MatchesPyTorchWithPaddingAndScaling) {
  RefFile ref("nn_layers");
  int n = 0;
  for (auto& c : ref.cases()) {
    if (c.rfind("embedding_", 0) != 0) continue;
    SCOPED_TRACE(c);
    auto p = ref.params(c);
    int64_t pad = p["padding_idx"];
    bool scale = p["scale"];
    Tensor w = ref.get(c, "w");
    nn::Embedding emb(w.size(0), w.size(1), pad, scale);
    if (pad >= 0) {  // the constructor zeroes the padding row
      std::vector<float> row = emb.weight.to_vector<float>();
      for (int64_t j = 0; j < w.size(1); ++j) EXPECT_EQ(row[size_t(pad * w.size(1) + j)], 0.f);
    }
    set(emb.weight, w);
    Tensor y = emb.forward(ref.get(c, "ids"));
    EXPECT_CLOSE(y, ref.get(c, "y"), kF32);
    backward(y, ref.get(c, "gy"));
    EXPECT_CLOSE(emb.weight.grad(), ref.get(c, "gw"), kF32);  // padding row: exactly zero in both
    ++n;
  }
  EXPECT_EQ(n, 4);
}

TEST(Embedding, OutOfRangeIdIsAnError) {
  nn::Embedding emb(5, 3);
  EXPECT_THROW(emb.forward(Tensor::from_vector<int64_t>({1, 5}, {2})), Error);
  EXPECT_THROW(nn::Embedding(5, 3, 7), Error);  // padding_idx outside the table
}

// Misuse named where it happens: a LayerNorm of no features (it failed later, in forward), and a
// backward gradient of another dtype than its root (named by the first op, "mul: dtypes differ").
TEST(LayerNorm, ANonPositiveDimAndAGradientOfAnotherDtypeAreNamed) {
  EXPECT_THROW(nn::LayerNorm(0), Error);
  EXPECT_THROW(nn::LayerNorm(-3), Error);
  Tensor a = Tensor::full({2}, 1.0);
  a.set_requires_grad(true);
  Tensor y = mul(a, a);
  try {
    backward(y, Tensor::ones({2}, DType::f64));
    ADD_FAILURE() << "accepted an f64 gradient for an f32 root";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("backward: gradient", 0), 0u) << e.what();
  }
}

TEST(LayerNorm, MatchesPyTorch) {
  RefFile ref("nn_layers");
  int n = 0;
  for (auto& c : ref.cases()) {
    if (c.rfind("layernorm_", 0) != 0) continue;
    SCOPED_TRACE(c);
    Tensor x = ref.get(c, "x");
    nn::LayerNorm ln(x.size(-1), ref.params(c)["eps"].get<double>());
    set(ln.weight, ref.get(c, "w"));
    set(ln.bias, ref.get(c, "b"));
    x.set_requires_grad(true);
    Tensor y = ln.forward(x);
    EXPECT_CLOSE(y, ref.get(c, "y"), kF32);
    backward(y, ref.get(c, "gy"));
    EXPECT_CLOSE(x.grad(), ref.get(c, "gx"), kF32);
    // weight/bias gradients sum over up to 6 rows: 1e-5 relative holds.
    EXPECT_CLOSE(ln.weight.grad(), ref.get(c, "gw"), kF32);
    EXPECT_CLOSE(ln.bias.grad(), ref.get(c, "gb"), kF32);
    ++n;
  }
  EXPECT_EQ(n, 3);
}

TEST(PositionwiseFFN, MatchesPyTorchForEveryActivation) {
  RefFile ref("nn_layers");
  int n = 0;
  for (auto& c : ref.cases()) {
    if (c.rfind("ffn_", 0) != 0) continue;
    SCOPED_TRACE(c);
    Tensor x = ref.get(c, "x"), w1 = ref.get(c, "w1");
    nn::PositionwiseFFN ffn(w1.size(1), w1.size(0), nn::parse_activation(ref.params(c)["activation"]), 0.0);
    set(ffn.fc1->weight, w1);
    set(ffn.fc1->bias, ref.get(c, "b1"));
    set(ffn.fc2->weight, ref.get(c, "w2"));
    set(ffn.fc2->bias, ref.get(c, "b2"));
    x.set_requires_grad(true);
    Tensor y = ffn.forward(x);
    EXPECT_CLOSE(y, ref.get(c, "y"), kF32);
    backward(y, ref.get(c, "gy"));
    EXPECT_CLOSE(x.grad(), ref.get(c, "gx"), kF32);
    EXPECT_CLOSE(ffn.fc1->weight.grad(), ref.get(c, "gw1"), kF32);
    EXPECT_CLOSE(ffn.fc1->bias.grad(), ref.get(c, "gb1"), kF32);
    EXPECT_CLOSE(ffn.fc2->weight.grad(), ref.get(c, "gw2"), kF32);
    EXPECT_CLOSE(ffn.fc2->bias.grad(), ref.get(c, "gb2"), kF32);
    ++n;
  }
  EXPECT_EQ(n, 4);
  EXPECT_THROW(nn::parse_activation("tanhh"), Error);
}

TEST(Dropout, TrainingDropsAFractionPAndRescales) {
  const double p = 0.3;
  nn::Dropout drop(p);
  const int64_t N = 200000;
  Tensor x = Tensor::full({N}, 2.0);
  x.set_requires_grad(true);
  Tensor y = drop.forward(x);
  std::vector<float> v = y.to_vector<float>();
  int64_t zeros = 0;
  for (float f : v) {
    if (f == 0.f) ++zeros;
    else ASSERT_NEAR(f, 2.0 / (1 - p), 1e-5);  // survivors scaled by 1/(1-p)
  }
  // Binomial(N, p): std sqrt(N p (1-p)) ~ 205; allow 5 std.
  EXPECT_NEAR(double(zeros), p * N, 5 * std::sqrt(N * p * (1 - p)));
  backward(y, Tensor::ones({N}));
  std::vector<float> g = x.grad().to_vector<float>();
  for (int64_t i = 0; i < N; ++i) ASSERT_EQ(g[size_t(i)] == 0.f, v[size_t(i)] == 0.f) << i;  // same mask
  drop.eval();
  Tensor z = drop.forward(x);
  EXPECT_TRUE(bit_equal(z, x));  // identity in eval mode
}

TEST(StateDict, SavedAndReloadedLayersGiveBitIdenticalOutputs) {
  nn::PositionwiseFFN a(16, 40, nn::Activation::gelu, 0.0), b(16, 40, nn::Activation::gelu, 0.0);
  nn::LayerNorm ln(16);
  Tensor x = randn({3, 5, 16}, 42);
  auto dir = std::filesystem::temp_directory_path() / ("qkv_test_nn_ffn_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "ffn.safetensors").string();
  a.save(path);
  ASSERT_FALSE(bit_equal(a.forward(x), b.forward(x)));
  b.load(path);
  EXPECT_TRUE(bit_equal(a.forward(x), b.forward(x)));
  std::filesystem::remove_all(dir);
}
