// ops/elementwise against PyTorch (tools/refs/ops_elementwise.py) and finite differences.
#include "qkv/ops/elementwise.h"

#include <gtest/gtest.h>

#include "gradcheck.h"
#include "qkv/autograd/node.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

Tensor apply_unary(const std::string& op, const Tensor& x) {
  if (op == "neg") return neg(x);
  if (op == "exp") return exp(x);
  if (op == "log") return log(x);
  if (op == "sqrt") return sqrt(x);
  if (op == "abs") return abs(x);
  if (op == "tanh") return tanh(x);
  if (op == "sigmoid") return sigmoid(x);
  if (op == "relu") return relu(x);
  if (op == "silu") return silu(x);
  if (op == "gelu") return gelu(x);
  if (op == "gelu_tanh") return gelu(x, GeluApprox::tanh);
  if (op == "square") return square(x);
  if (op == "pow3") return pow(x, 3.0);
  if (op == "pow_half") return pow(x, 0.5);
  throw std::runtime_error("unknown op " + op);
}

Tensor apply_binary(const std::string& op, const Tensor& a, const Tensor& b) {
  if (op == "add") return add(a, b);
  if (op == "sub") return sub(a, b);
  if (op == "mul") return mul(a, b);
  if (op == "div") return div(a, b);
  throw std::runtime_error("unknown op " + op);
}

// The transpose of the last two axes as a strided view (no copy, not recorded).
Tensor t_view(const Tensor& x) {
  Shape s = x.shape(), st = x.strides();
  int n = s.ndim();
  std::swap(s[n - 1], s[n - 2]);
  std::swap(st[n - 1], st[n - 2]);
  return x.as_strided(s, st, x.offset());
}

}  // namespace

TEST(Elementwise, MatchesPyTorch) {
  RefFile ref("ops_elementwise");
  int n = 0;
  for (const auto& c : ref.cases()) {
    SCOPED_TRACE(c);
    auto p = ref.params(c);
    std::string op = p["op"];
    if (c.rfind("unary_", 0) == 0) {
      Tensor x = ref.get(c, "x");
      if (p["transposed"].get<bool>()) x = t_view(x);  // a non-contiguous leaf
      x.set_requires_grad(true);
      Tensor y = apply_unary(op, x);
      EXPECT_CLOSE(y, ref.get(c, "y"), kF32);
      backward(y, ref.get(c, "gy"));
      EXPECT_CLOSE(x.grad(), ref.get(c, "gx"), kF32);
    } else {
      Tensor a = ref.get(c, "a"), b = ref.get(c, "b");
      a.set_requires_grad(true);
      b.set_requires_grad(true);
      Tensor y = apply_binary(op, a, b);
      EXPECT_CLOSE(y, ref.get(c, "y"), kF32);
      backward(y, ref.get(c, "gy"));
      // Broadcast gradients are sums over up to 64 terms: 1e-5 relative still holds here.
      EXPECT_CLOSE(a.grad(), ref.get(c, "ga"), kF32);
      EXPECT_CLOSE(b.grad(), ref.get(c, "gb"), kF32);
    }
    ++n;
  }
  EXPECT_GT(n, 40);
}

TEST(Elementwise, GradcheckF64) {
  for (std::string op : {"neg", "exp", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh", "square", "pow3"}) {
    SCOPED_TRACE(op);
    EXPECT_GRADCHECK([&](const std::vector<Tensor>& in) { return apply_unary(op, in[0]); },
                     {randn({3, 4}, 7, DType::f64)});
  }
  Tensor pos = affine(abs(randn({3, 4}, 8, DType::f64)), 1.0, 0.5);
  for (std::string op : {"log", "sqrt"}) {
    SCOPED_TRACE(op);
    EXPECT_GRADCHECK([&](const std::vector<Tensor>& in) { return apply_unary(op, in[0]); }, {pos});
  }
  for (std::string op : {"add", "sub", "mul", "div"}) {
    SCOPED_TRACE(op);
    EXPECT_GRADCHECK([&](const std::vector<Tensor>& in) { return apply_binary(op, in[0], in[1]); },
                     {randn({2, 3, 4}, 9, DType::f64), affine(abs(randn({3, 1}, 10, DType::f64)), 1.0, 0.5)});
  }
}

TEST(Elementwise, BadInputsThrowNamingTheOp) {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4, 3});
  try {
    add(a, b);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("add"), std::string::npos) << m;
    EXPECT_NE(m.find("(2, 3)"), std::string::npos) << m;
    EXPECT_NE(m.find("(4, 3)"), std::string::npos) << m;
  }
  EXPECT_THROW(mul(a, Tensor::zeros({2, 3}, DType::f64)), Error);
  EXPECT_THROW(exp(Tensor::zeros({2}, DType::i64)), Error);
}

TEST(Autograd, BackwardTwiceThroughFreedGraphThrows) {
  Tensor x = randn({3}, 1);
  x.set_requires_grad(true);
  Tensor y = mul(exp(x), x);
  backward(y, Tensor::ones({3}));
  try {
    backward(y, Tensor::ones({3}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("second time"), std::string::npos) << e.what();
  }
}

TEST(Autograd, RetainGraphAccumulatesIntoLeaves) {
  Tensor x = randn({4}, 2);
  x.set_requires_grad(true);
  Tensor y = mul(x, x);
  backward(y, Tensor::ones({4}), /*retain_graph=*/true);
  backward(y, Tensor::ones({4}));
  std::vector<float> xv = x.to_vector<float>(), g = x.grad().to_vector<float>();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_FLOAT_EQ(g[i], 4 * xv[i]);  // 2 * (2x)
}

TEST(Autograd, NoGradRecordsNothing) {
  Tensor x = randn({4}, 3);
  x.set_requires_grad(true);
  NoGradGuard ng;
  Tensor y = exp(x);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(y.grad_fn(), nullptr);
}

TEST(Autograd, DiamondGraphWithUnreachedBranch) {
  // y = a * b + a, with b not requiring grad; a's gradient is b + 1.
  Tensor a = randn({5}, 4), b = randn({5}, 5);
  a.set_requires_grad(true);
  Tensor y = add(mul(a, b), a);
  backward(y, Tensor::ones({5}));
  std::vector<float> bv = b.to_vector<float>(), g = a.grad().to_vector<float>();
  for (size_t i = 0; i < bv.size(); ++i) EXPECT_FLOAT_EQ(g[i], bv[i] + 1);
}
