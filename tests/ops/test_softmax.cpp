// ops/softmax against PyTorch (tools/refs/ops_softmax.py): plain, bool / u8 / additive /
// broadcast masks, fully masked rows; finite differences in f64; errors.
#include "qkv/ops/softmax.h"

#include <gtest/gtest.h>

#include <cmath>

#include "gradcheck.h"
#include "qkv/autograd/node.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/shape.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

bool all_finite_or_neginf(const Tensor& t) {
  for (float v : t.to_vector<float>())
    if (std::isnan(v) || v == INFINITY) return false;
  return true;
}

}  // namespace

TEST(Softmax, MatchesPyTorch) {
  RefFile ref("ops_softmax");
  int n = 0, full = 0;
  for (const auto& c : ref.cases()) {
    SCOPED_TRACE(c);
    auto p = ref.params(c);
    bool log = p["log"];
    std::string kind = p["mask"];
    // bool masks are also run as u8 (same semantics: non-zero = masked out).
    for (int as_u8 = 0; as_u8 < (kind == "bool" ? 2 : 1); ++as_u8) {
      Tensor x = ref.get(c, "x").clone();  // a fresh leaf per pass (grads accumulate)
      x.set_requires_grad(true);
      Tensor mask;
      if (kind != "none") mask = ref.get(c, "mask").clone();
      if (kind == "bool" && as_u8) mask = mask.to(DType::u8);
      if (kind == "bool") {
        ASSERT_TRUE(as_u8 ? mask.dtype() == DType::u8 : mask.dtype() == DType::boolean);
      }
      if (kind == "add") mask.set_requires_grad(true);
      Tensor y = log ? log_softmax(x, mask) : softmax(x, mask);
      EXPECT_CLOSE(y, ref.get(c, "y"), kF32);
      EXPECT_TRUE(all_finite_or_neginf(y));
      backward(y, ref.get(c, "gy"));
      EXPECT_CLOSE(x.grad(), ref.get(c, "gx"), kF32);
      EXPECT_TRUE(all_finite_or_neginf(x.grad()));
      if (kind == "add") {
        // The additive mask's gradient sums the logits' gradient over up to 3 * 5 broadcast
        // entries: f32 tolerance still holds at that count.
        EXPECT_CLOSE(mask.grad(), ref.get(c, "gmask"), kF32);
      }
    }
    full += p["full_rows"].get<bool>();
    ++n;
  }
  EXPECT_EQ(n, 20);
  EXPECT_EQ(full, 6);
}

TEST(Softmax, FullyMaskedRowIsZeroWithZeroGradient) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  x.set_requires_grad(true);
  Tensor mask = Tensor::from_vector<uint8_t>({1, 1, 1, 0, 1, 0}, {2, 3});
  Tensor y = softmax(x, mask);
  std::vector<float> yv = y.to_vector<float>();
  for (int j = 0; j < 3; ++j) EXPECT_EQ(yv[size_t(j)], 0.f);
  // Row 1 keeps logits 4 and 6: softmax = [1/(1+e^2), 0, e^2/(1+e^2)].
  EXPECT_NEAR(yv[3], 1.0 / (1.0 + std::exp(2.0)), 1e-7);
  EXPECT_EQ(yv[4], 0.f);
  backward(y, Tensor::from_vector<float>({1, 2, 3, 1, 2, 3}, {2, 3}));
  std::vector<float> g = x.grad().to_vector<float>();
  for (int j = 0; j < 3; ++j) EXPECT_EQ(g[size_t(j)], 0.f);  // the fully masked row
  // Row 1: gx_j = y_j (gy_j - <gy, y>) with y = [a, 0, b], gy = [1, 2, 3].
  double a = 1.0 / (1.0 + std::exp(2.0)), b = 1.0 - a, dot = a * 1 + b * 3;
  EXPECT_NEAR(g[3], a * (1 - dot), 1e-6);
  EXPECT_EQ(g[4], 0.f);
  EXPECT_NEAR(g[5], b * (3 - dot), 1e-6);

  Tensor z = Tensor::from_vector<float>({1, 2, 3}, {1, 3});
  z.set_requires_grad(true);
  Tensor ly = log_softmax(z, Tensor::full({1, 3}, -INFINITY));
  for (float v : ly.to_vector<float>()) EXPECT_EQ(v, -INFINITY);
  backward(ly, Tensor::ones({1, 3}));
  for (float g : z.grad().to_vector<float>()) EXPECT_EQ(g, 0.f);
}

TEST(Softmax, GradcheckF64) {
  Tensor x = randn({2, 3, 6}, 21, DType::f64);
  Tensor add_mask = randn({3, 6}, 22, DType::f64);
  Tensor bool_mask = Tensor::from_vector<uint8_t>({0, 1, 0, 0, 1, 0}, {6});
  for (bool log : {false, true}) {
    SCOPED_TRACE(log ? "log_softmax" : "softmax");
    auto f = [log](const Tensor& a, const Tensor& m) { return log ? log_softmax(a, m) : softmax(a, m); };
    EXPECT_GRADCHECK([&](const std::vector<Tensor>& in) { return f(in[0], Tensor()); }, {x});
    EXPECT_GRADCHECK([&](const std::vector<Tensor>& in) { return f(in[0], in[1]); }, {x, add_mask});
    // Masked positions of log_softmax are -inf: project only softmax outputs through them.
    if (!log) {
      EXPECT_GRADCHECK([&](const std::vector<Tensor>& in) { return f(in[0], bool_mask); }, {x});
    }
  }
  // log_softmax with a bool mask: its finite outputs, via exp (masked entries become 0).
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& in) { return exp(log_softmax(in[0], bool_mask)); }, {x});
}

TEST(Softmax, MaskAndInputErrorsNameTheOp) {
  Tensor x = Tensor::zeros({2, 3, 4});
  auto expect_msg = [](auto&& fn, std::vector<std::string> parts) {
    try {
      fn();
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      for (const auto& s : parts) EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what();
    }
  };
  expect_msg([&] { softmax(x, Tensor::zeros({3, 5}, DType::boolean)); }, {"softmax", "(3, 5)", "(2, 3, 4)"});
  expect_msg([&] { log_softmax(x, Tensor::zeros({1, 2, 3, 4}, DType::u8)); }, {"log_softmax", "broadcast"});
  expect_msg([&] { softmax(x, Tensor::zeros({4}, DType::f64)); }, {"softmax", "f64", "additive"});
  expect_msg([&] { softmax(x, Tensor::zeros({4}, DType::i64)); }, {"softmax", "i64"});
  expect_msg([&] { softmax(Tensor::scalar(1.0)); }, {"softmax", "at least one axis"});
  expect_msg([&] { softmax(Tensor::zeros({3}, DType::i32)); }, {"softmax", "i32"});
}

// Outputs of 16 MB and more are written with streaming stores (kernels/cpu/softmax.cpp); they
// must equal the ordinary path's, which smaller slices of the same rows take.
TEST(Softmax, LargeOutputsStreamedEqualSmallSlices) {
  NoGradGuard ng;
  Tensor x = randn({4200, 1024}, 11);  // 16.4 MB
  x.data<float>()[5 * 1024 + 3] = -INFINITY;
  for (bool log : {false, true}) {
    SCOPED_TRACE(log ? "log_softmax" : "softmax");
    Tensor y = log ? log_softmax(x) : softmax(x);
    for (int64_t r0 : {int64_t(0), int64_t(2100), int64_t(4190)}) {
      Tensor part = slice(x, 0, r0, r0 + 10).contiguous();
      EXPECT_CLOSE(slice(y, 0, r0, r0 + 10), log ? log_softmax(part) : softmax(part), kF32);
    }
  }
}
