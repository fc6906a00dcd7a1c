// ops/norm (layer_norm) against PyTorch (tools/refs/ops_norm.py), finite differences, determinism.
#include "qkv/ops/norm.h"

#include <gtest/gtest.h>

#include "gradcheck.h"
#include "helpers.h"
#include "qkv/autograd/node.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

TEST(LayerNorm, MatchesPyTorch) {
  RefFile ref("ops_norm");
  int n = 0;
  for (const auto& c : ref.cases()) {
    SCOPED_TRACE(c);
    double eps = ref.params(c)["eps"];
    Tensor x = ref.get(c, "x");
    Tensor w = ref.has(c, "w") ? ref.get(c, "w") : Tensor();
    Tensor b = ref.has(c, "b") ? ref.get(c, "b") : Tensor();
    x.set_requires_grad(true);
    if (w.defined()) w.set_requires_grad(true);
    if (b.defined()) b.set_requires_grad(true);
    Tensor y = layer_norm(x, w, b, eps);
    EXPECT_CLOSE(y, ref.get(c, "y"), kF32);
    backward(y, ref.get(c, "gy"));
    EXPECT_CLOSE(x.grad(), ref.get(c, "gx"), kF32);
    // dweight/dbias sum over up to 64 rows; the reference is the exact (f64) sum.
    if (w.defined()) {
      EXPECT_CLOSE(w.grad(), ref.get(c, "gw"), kF32);
    }
    if (b.defined()) {
      EXPECT_CLOSE(b.grad(), ref.get(c, "gb"), kF32);
    }
    ++n;
  }
  EXPECT_EQ(n, 18);
}

TEST(LayerNorm, GradcheckF64) {
  Tensor x = randn({3, 2, 7}, 31, DType::f64);
  Tensor w = randn({7}, 32, DType::f64), b = randn({7}, 33, DType::f64);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2]); }, {x, w, b});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return layer_norm(in[0]); }, {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], Tensor(), 1e-3); }, {x, w});
}

TEST(LayerNorm, ParameterGradientsDeterministicAcrossThreadCounts) {
  Tensor x = randn({512, 256}, 34), w = randn({256}, 35), b = randn({256}, 36), gy = randn({512, 256}, 37);
  auto run = [&](int threads) {
    ThreadGuard guard(threads);
    Tensor xx = x.clone(), ww = w.clone(), bb = b.clone();
    xx.set_requires_grad(true);
    ww.set_requires_grad(true);
    bb.set_requires_grad(true);
    backward(layer_norm(xx, ww, bb), gy);
    return std::vector<Tensor>{xx.grad(), ww.grad(), bb.grad()};
  };
  auto g1 = run(1), g2 = run(2);
  for (int k = 0; k < 3; ++k) EXPECT_TRUE(bit_equal(g1[size_t(k)], g2[size_t(k)])) << k;
}

TEST(LayerNorm, BadInputsThrowNamingTheOp) {
  Tensor x = Tensor::zeros({2, 4});
  auto expect_msg = [](auto&& fn, std::vector<std::string> parts) {
    try {
      fn();
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      for (const auto& s : parts) EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what();
    }
  };
  expect_msg([&] { layer_norm(x, Tensor::ones({5})); }, {"layer_norm", "weight", "(4)", "(5)"});
  expect_msg([&] { layer_norm(x, Tensor(), Tensor::ones({4}, DType::f64)); }, {"layer_norm", "bias", "f64"});
  expect_msg([&] { layer_norm(Tensor::zeros({3, 0})); }, {"layer_norm", "(3, 0)"});
  expect_msg([&] { layer_norm(x, Tensor(), Tensor(), -1.0); }, {"layer_norm", "eps"});
  expect_msg([&] { layer_norm(Tensor::zeros({2}, DType::i64)); }, {"layer_norm", "i64"});
}
