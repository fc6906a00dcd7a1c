// ops/embedding against PyTorch (tools/refs/ops_embedding.py), finite differences, errors.
#include "qkv/ops/embedding.h"

#include <gtest/gtest.h>

#include "gradcheck.h"
#include "helpers.h"
#include "qkv/autograd/node.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

TEST(Embedding, MatchesPyTorch) {
  RefFile ref("ops_embedding");
  int n = 0;
  for (const auto& c : ref.cases()) {
    SCOPED_TRACE(c);
    int64_t pad = ref.params(c)["padding_idx"];
    Tensor ids = ref.get(c, "ids"), w = ref.get(c, "w");
    w.set_requires_grad(true);
    Tensor y = embedding(ids, w, pad);
    EXPECT_TRUE(bit_equal(y, ref.get(c, "y")));  // a gather copies rows exactly
    backward(y, ref.get(c, "gy"));
    // Repeated ids sum their rows' gradients; the reference is the exact (f64) sum.
    EXPECT_CLOSE(w.grad(), ref.get(c, "gw"), kF32);
    ++n;
  }
  EXPECT_EQ(n, 6);
}

TEST(Embedding, GradcheckF64AndPaddingRow) {
  Tensor ids = Tensor::from_vector<int64_t>({1, 2, 1, 0, 3, 1}, {2, 3});
  Tensor w = randn({4, 5}, 41, DType::f64);
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& in) { return embedding(ids, in[0]); }, {w});
  Tensor w2 = w.clone();
  w2.set_requires_grad(true);
  backward(embedding(ids, w2, /*padding_idx=*/1), Tensor::ones({2, 3, 5}, DType::f64));
  std::vector<double> g = w2.grad().to_vector<double>();
  for (int j = 0; j < 5; ++j) {
    EXPECT_EQ(g[size_t(5 + j)], 0.0);       // padding row 1
    EXPECT_EQ(g[size_t(j)], 1.0);           // id 0 once
    EXPECT_EQ(g[size_t(10 + j)], 1.0);      // id 2 once
  }
}

TEST(Embedding, BackwardDeterministicAcrossThreadCounts) {
  std::vector<int64_t> idv(4096);
  for (size_t i = 0; i < idv.size(); ++i) idv[i] = int64_t((i * 7919) % 50);
  Tensor ids = Tensor::from_vector(idv, {64, 64});
  Tensor w = randn({50, 256}, 42), gy = randn({64, 64, 256}, 43);
  auto run = [&](int threads) {
    ThreadGuard guard(threads);
    Tensor ww = w.clone();
    ww.set_requires_grad(true);
    backward(embedding(ids, ww), gy);
    return ww.grad();
  };
  Tensor g1 = run(1), g2 = run(2);
  EXPECT_TRUE(bit_equal(g1, g2));
}

TEST(Embedding, BadInputsThrowNamingTheOp) {
  Tensor w = Tensor::zeros({5, 3});
  auto expect_msg = [](auto&& fn, std::vector<std::string> parts) {
    try {
      fn();
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      for (const auto& s : parts) EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what();
    }
  };
  expect_msg([&] { embedding(Tensor::from_vector<int64_t>({0, 7}, {2}), w); }, {"embedding", "id 7", "V = 5"});
  expect_msg([&] { embedding(Tensor::from_vector<int32_t>({-1}, {1}), w); }, {"embedding", "id -1", "V = 5"});
  expect_msg([&] { embedding(Tensor::zeros({2}, DType::f32), w); }, {"embedding", "ids", "f32"});
  expect_msg([&] { embedding(Tensor::zeros({2}, DType::i64), Tensor::zeros({5})); }, {"embedding", "(V, D)", "(5)"});
  expect_msg([&] { embedding(Tensor::zeros({2}, DType::i64), w, 5); }, {"embedding", "padding_idx", "5"});
}
