// ops/loss against PyTorch (tools/refs/ops_loss.py): cross_entropy (ignore_index, label smoothing,
// none/sum/mean), nll_loss, mse_loss; the all-ignored rule; finite differences; errors.
#include "qkv/ops/loss.h"

#include <gtest/gtest.h>

#include "gradcheck.h"
#include "qkv/autograd/node.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

Reduction reduction_of(const std::string& s) {
  if (s == "none") return Reduction::none;
  if (s == "sum") return Reduction::sum;
  return Reduction::mean;
}

}  // namespace

TEST(Loss, MatchesPyTorch) {
  RefFile ref("ops_loss");
  int n = 0;
  for (const auto& c : ref.cases()) {
    SCOPED_TRACE(c);
    auto p = ref.params(c);
    std::string op = p["op"];
    Reduction red = reduction_of(p["reduction"]);
    if (op == "mse") {
      Tensor a = ref.get(c, "a"), b = ref.get(c, "b");
      a.set_requires_grad(true);
      b.set_requires_grad(true);
      Tensor y = mse_loss(a, b, red);
      EXPECT_CLOSE(y, ref.get(c, "y"), kF32);
      backward(y, ref.get(c, "gy"));
      EXPECT_CLOSE(a.grad(), ref.get(c, "ga"), kF32);
      EXPECT_CLOSE(b.grad(), ref.get(c, "gb"), kF32);
    } else {
      Tensor x = ref.get(c, "x"), t = ref.get(c, "t");
      x.set_requires_grad(true);
      int64_t ign = p["ignore_index"];
      Tensor y = op == "nll" ? nll_loss(x, t, ign, red)
                             : cross_entropy(x, t, ign, p["smoothing"].get<double>(), red);
      ASSERT_EQ(y.shape(), ref.get(c, "y").shape());
      // sum/mean add up to 32 per-row losses; the reference is the exact (f64) sum.
      EXPECT_CLOSE(y, ref.get(c, "y"), kF32);
      backward(y, ref.get(c, "gy"));
      EXPECT_CLOSE(x.grad(), ref.get(c, "gx"), kF32);
    }
    ++n;
  }
  EXPECT_EQ(n, 45);
}

TEST(Loss, AllIgnoredMeanIsZeroWithZeroGradient) {
  // qkv rule (torch gives NaN = 0/0): a mean over no counted targets is 0.
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor t = Tensor::from_vector<int64_t>({-100, -100}, {2});
  for (int which = 0; which < 2; ++which) {
    Tensor xx = x.clone();
    xx.set_requires_grad(true);
    Tensor y = which ? nll_loss(xx, t) : cross_entropy(xx, t, -100, 0.1);
    EXPECT_EQ(y.item(), 0.0);
    backward(y);
    for (float g : xx.grad().to_vector<float>()) EXPECT_EQ(g, 0.f);
  }
  // sum and none give zeros too (as in torch).
  EXPECT_EQ(cross_entropy(x, t, -100, 0.0, Reduction::sum).item(), 0.0);
  EXPECT_EQ(cross_entropy(x, t, -100, 0.0, Reduction::none).to_vector<float>(), (std::vector<float>{0.f, 0.f}));
}

TEST(Loss, GradcheckF64) {
  Tensor x = randn({4, 5}, 61, DType::f64);
  Tensor t = Tensor::from_vector<int64_t>({1, 4, -100, 0}, {4});
  for (double ls : {0.0, 0.15}) {
    for (Reduction r : {Reduction::none, Reduction::sum, Reduction::mean}) {
      EXPECT_GRADCHECK([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], t, -100, ls, r); }, {x});
    }
  }
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& in) { return nll_loss(in[0], t); }, {x});
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& in) { return mse_loss(in[0], in[1]); },
                   {x, randn({4, 5}, 62, DType::f64)});
}

TEST(Loss, BadInputsThrowNamingTheOp) {
  Tensor x = Tensor::zeros({3, 4});
  auto expect_msg = [](auto&& fn, std::vector<std::string> parts) {
    try {
      fn();
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      for (const auto& s : parts) EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what();
    }
  };
  Tensor bad = Tensor::from_vector<int64_t>({0, 4, 1}, {3});
  expect_msg([&] { cross_entropy(x, bad); }, {"cross_entropy", "target 4", "C = 4"});
  expect_msg([&] { nll_loss(x, Tensor::from_vector<int64_t>({0, -2, 1}, {3})); }, {"nll_loss", "target -2"});
  expect_msg([&] { cross_entropy(x, Tensor::zeros({4}, DType::i64)); }, {"cross_entropy", "(3)", "(4)"});
  expect_msg([&] { cross_entropy(x, Tensor::zeros({3}, DType::f32)); }, {"cross_entropy", "targets", "f32"});
  expect_msg([&] { cross_entropy(x, Tensor::zeros({3}, DType::i64), -100, 1.5); }, {"label_smoothing", "1.5"});
  expect_msg([&] { mse_loss(x, Tensor::zeros({4, 3})); }, {"mse_loss", "(3, 4)", "(4, 3)"});
}
