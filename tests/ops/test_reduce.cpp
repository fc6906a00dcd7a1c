// ops/reduce against PyTorch (tools/refs/ops_reduce.py), finite differences and determinism.
#include "qkv/ops/reduce.h"

#include <gtest/gtest.h>

#include "gradcheck.h"
#include "helpers.h"
#include "qkv/autograd/node.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

std::vector<int> axes_of(const nlohmann::json& p) { return p["axes"].get<std::vector<int>>(); }

}  // namespace

TEST(Reduce, SumMeanMaxMatchPyTorch) {
  RefFile ref("ops_reduce");
  int n = 0;
  for (const auto& c : ref.cases()) {
    SCOPED_TRACE(c);
    auto p = ref.params(c);
    std::string op = p["op"];
    Tensor x = ref.get(c, "x");
    if (p["transposed"].get<bool>()) {
      x = transposed_view(x);
      ASSERT_FALSE(x.is_contiguous());
    }
    x.set_requires_grad(true);
    Tensor y;
    if (op == "max") {
      int axis = p["axis"];
      bool keepdim = p["keepdim"];
      y = max(x, axis, keepdim);
      Tensor idx = argmax(x, axis, keepdim);
      EXPECT_TRUE(bit_equal(idx, ref.get(c, "idx")));
      EXPECT_TRUE(bit_equal(y, ref.get(c, "y")));  // a max is an element: exact
    } else {
      y = op == "sum" ? sum(x, axes_of(p), p["keepdim"]) : mean(x, axes_of(p), p["keepdim"]);
      // Reference is the float64 result rounded to f32; qkv accumulates in double.
      EXPECT_CLOSE(y, ref.get(c, "y"), kF32);
    }
    ASSERT_EQ(y.shape(), ref.get(c, "y").shape());
    backward(y, ref.get(c, "gy"));
    EXPECT_CLOSE(x.grad(), ref.get(c, "gx"), kF32);
    ++n;
  }
  EXPECT_EQ(n, 34);
}

TEST(Reduce, GradcheckF64) {
  Tensor x = randn({3, 4, 5}, 11, DType::f64);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return sum(in[0], {0, 2}); }, {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return sum(in[0]); }, {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return mean(in[0], {-1}, true); }, {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return mean(in[0], {1, 0}); }, {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return max(in[0], 1); }, {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return max(in[0], -1, true); }, {x});
}

TEST(Reduce, DeterministicAcrossThreadCounts) {
  Tensor x = randn({3, 200000}, 12);
  Tensor big = randn({1000003}, 13);
  auto run = [&](int threads) {
    ThreadGuard guard(threads);
    return std::vector<Tensor>{sum(x, {1}), sum(big), mean(x, {0})};
  };
  auto r1 = run(1), r2 = run(2);
  for (size_t k = 0; k < r1.size(); ++k) EXPECT_TRUE(bit_equal(r1[k], r2[k])) << k;
}

TEST(Reduce, F64AndEdgeCases) {
  // f64: exact small sums, independent of PyTorch.
  Tensor x = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(sum(x, {0}).to_vector<double>(), (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(mean(x, {1}).to_vector<double>(), (std::vector<double>{2, 5}));
  EXPECT_EQ(sum(x).shape(), Shape{});
  EXPECT_EQ(sum(x, {}, true).shape(), (Shape{1, 1}));
  EXPECT_EQ(max(x, 0).to_vector<double>(), (std::vector<double>{4, 5, 6}));
  // NaN propagates through max, like torch.
  Tensor nan = Tensor::from_vector<float>({1.f, NAN, 3.f}, {3});
  EXPECT_TRUE(std::isnan(max(nan, 0).item()));
  EXPECT_EQ(argmax(nan, 0).item(), 1);
  // Empty reductions: sum 0, mean NaN (torch).
  Tensor empty = Tensor::zeros({2, 0});
  EXPECT_EQ(sum(empty, {1}).to_vector<float>(), (std::vector<float>{0.f, 0.f}));
  EXPECT_TRUE(std::isnan(mean(empty, {1}).to_vector<float>()[0]));
}

TEST(Reduce, BadInputsThrowNamingTheOp) {
  Tensor x = Tensor::zeros({2, 3});
  auto expect_msg = [](auto&& fn, std::vector<std::string> parts) {
    try {
      fn();
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      for (const auto& s : parts) EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what();
    }
  };
  expect_msg([&] { sum(x, {2}); }, {"sum", "axis 2", "(2, 3)"});
  expect_msg([&] { mean(x, {1, -1}); }, {"mean", "repeated axis"});
  expect_msg([&] { max(x, -3); }, {"max", "axis -3"});
  expect_msg([&] { max(Tensor::zeros({2, 0}), 1); }, {"max", "extent 0"});
  expect_msg([&] { argmax(Tensor::zeros({2}, DType::i64), 0); }, {"argmax", "i64"});
  expect_msg([&] { sum(Tensor()); }, {"sum", "undefined"});
}
