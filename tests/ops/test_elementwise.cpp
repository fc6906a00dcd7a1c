// ops/elementwise against PyTorch (tools/refs/ops_elementwise.py) and finite differences.
#include "qkv/ops/elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include <gtest/gtest.h>

#include "gradcheck.h"
#include "helpers.h"
#include "qkv/autograd/node.h"
#include "qkv/ops/dropout.h"
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
      if (p["transposed"].get<bool>()) x = transposed_view(x);  // a non-contiguous leaf
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

// The f32 activation kernels (polynomials + kernels::vexp instead of libm, so that they vectorise)
// against double precision on a dense grid of [-30, 30] plus saturation points. Error is counted
// in units of f32 spacing at the true value ("ulps"), the spacing floored at that of `floor`:
// forward values are checked relative to themselves down to 1e-30 (tails included, per unit of
// the condition number where that exceeds 1); derivatives
// relative to max(|d|, 1), since the backward formulas use y (tanh' = 1 - y^2, as torch does),
// which is accurate only to f32 eps absolutely where the derivative is small. The references are
// written without cancellation (erfc, sigmoid) so that they hold in double far into the tails.
namespace {
double f32_ulps(double got, double want, double floor) {
  double ref = std::max(std::fabs(want), floor);
  double spacing = std::ldexp(1.0, std::ilogb(ref) - 23);
  return std::fabs(got - want) / spacing;
}
double sig(double x) { return 1 / (1 + std::exp(-x)); }
constexpr double kInvSqrt2 = 0.7071067811865476, kInvSqrt2Pi = 0.3989422804014327, kK = 0.7978845608028654;
double phi(double x) { return 0.5 * std::erfc(-x * kInvSqrt2); }  // P(N(0,1) <= x)
double u_tanh(double x) { return kK * (x + 0.044715 * x * x * x); }
}  // namespace

TEST(Elementwise, F32ActivationsAccurateToDoublePrecision) {
  struct Case {
    std::string op;
    double (*f)(double);
    double (*df)(double);
    double max_ulps, max_ulps_grad;
  };
  const std::vector<Case> cases = {
      {"exp", [](double x) { return std::exp(x); }, [](double x) { return std::exp(x); }, 4, 4},
      {"tanh", [](double x) { return std::tanh(x); }, [](double x) { return 1 / (std::cosh(x) * std::cosh(x)); }, 4, 4},
      {"sigmoid", [](double x) { return sig(x); }, [](double x) { return sig(x) * sig(-x); }, 4, 4},
      {"silu", [](double x) { return x * sig(x); }, [](double x) { return sig(x) * (1 + x * sig(-x)); }, 4, 4},
      {"gelu", [](double x) { return x * phi(x); },
       [](double x) { return phi(x) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x); }, 8, 8},
      {"gelu_tanh", [](double x) { return x * sig(2 * u_tanh(x)); },  // 0.5 x (1 + tanh u) = x sigmoid(2u)
       [](double x) {
         double s = sig(2 * u_tanh(x));
         return s + x * 2 * s * sig(-2 * u_tanh(x)) * kK * (1 + 3 * 0.044715 * x * x);
       },
       8, 8},
  };
  std::vector<float> xs;
  for (int i = -300000; i <= 300000; ++i) xs.push_back(float(i) * 1e-4f);  // [-30, 30], step 1e-4
  const size_t grid = xs.size();
  for (float v : {-100.f, -88.f, -87.5f, -60.f, -14.f, -13.f, 13.f, 14.f, 60.f, 87.5f, 88.f, 100.f}) xs.push_back(v);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    std::vector<float> in(xs.begin(), c.op == "exp" ? xs.begin() + int64_t(grid) : xs.end());  // exp: [-30, 30]
    Tensor x = Tensor::from_vector<float>(in, {int64_t(in.size())});
    x.set_requires_grad(true);
    Tensor y = apply_unary(c.op, x);
    backward(y, Tensor::ones(y.shape()));
    std::vector<float> yv = y.to_vector<float>(), gv = x.grad().to_vector<float>();
    double worst = 0, worst_g = 0, at = 0, at_g = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      // Forward error per unit of the condition number |x f'(x) / f(x)| where that exceeds 1: in a
      // tail like gelu_tanh's (f ~ x exp(-2u), cond ~ 180 at x = -9) one ulp of input moves the
      // output by cond ulps, so no f32 evaluation can do better.
      const double fx = c.f(in[i]), cond = fx != 0 ? std::fabs(double(in[i]) * c.df(in[i]) / fx) : 1.0;
      double e = f32_ulps(yv[i], fx, 1e-30) / std::max(1.0, cond), eg = f32_ulps(gv[i], c.df(in[i]), 1.0);
      if (!(e <= worst)) worst = e, at = in[i];  // NaN counts as the worst
      if (!(eg <= worst_g)) worst_g = eg, at_g = in[i];
    }
    std::printf("[ %-9s ] max error %.2f ulp (/ max(1, cond)) at x = %g; derivative %.2f ulp (of max(|d|, 1)) at x = %g\n",
                c.op.c_str(), worst, at, worst_g, at_g);
    EXPECT_LE(worst, c.max_ulps) << "at x = " << at;
    EXPECT_LE(worst_g, c.max_ulps_grad) << "at x = " << at_g;
  }
}

// relu's special values as torch.relu gives them (PyTorch 1.13): NaN stays NaN, -0 stays -0, and
// the gradient passes at NaN but not at either zero (threshold_backward: result <= 0 -> 0). Also
// through relu_dropout: the kept elements are relu's values times 1 / (1 - p) (a NaN too).
TEST(Elementwise, ReluSpecialValuesAsPyTorch) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> in = {nan, -0.f, 0.f, -1.f, 2.f, inf, -inf};
  const std::vector<float> want = {nan, -0.f, 0.f, 0.f, 2.f, inf, 0.f}, want_grad = {1, 0, 0, 0, 1, 1, 0};
  Tensor x = Tensor::from_vector<float>(in, {7});
  x.set_requires_grad(true);
  Tensor y = relu(x);
  backward(y, Tensor::ones({7}));
  for (size_t i = 0; i < in.size(); ++i) {
    const float v = y.to_vector<float>()[i];
    EXPECT_TRUE(std::isnan(want[i]) ? std::isnan(v) : v == want[i] && std::signbit(v) == std::signbit(want[i]))
        << "relu(" << in[i] << ") = " << v;
    EXPECT_EQ(x.grad().to_vector<float>()[i], want_grad[i]) << "at " << in[i];
  }
  // relu_dropout at p = 0.5, with the mask that dropout draws from the same generator state.
  std::vector<float> many;
  for (int r = 0; r < 64; ++r) many.insert(many.end(), in.begin(), in.end());
  Tensor xs = Tensor::from_vector<float>(many, {int64_t(many.size())});
  xs.set_requires_grad(true);
  Generator g1(5), g2(5);
  Tensor out = relu_dropout(xs, 0.5, true, g1);
  const std::vector<float> kept = dropout(Tensor::ones({int64_t(many.size())}), 0.5, true, g2).to_vector<float>();
  backward(out, Tensor::ones(out.shape()));
  int64_t nan_kept = 0;
  for (size_t i = 0; i < many.size(); ++i) {
    const float v = out.to_vector<float>()[i], w = kept[i] != 0 ? 2 * want[i % 7] : 0.f;
    EXPECT_TRUE(std::isnan(w) ? std::isnan(v) : v == w && std::signbit(v) == std::signbit(w))
        << "element " << i << ": " << v << " against " << w;
    EXPECT_EQ(xs.grad().to_vector<float>()[i], kept[i] != 0 ? 2 * want_grad[i % 7] : 0.f) << "element " << i;
    nan_kept += std::isnan(v);
  }
  EXPECT_GT(nan_kept, 0);
  // A NaN or inf gradient where x <= 0: 0, a select as torch's threshold_backward (not g * 0 = NaN).
  Tensor z = Tensor::from_vector<float>({-1.f, 0.f, -0.f, 3.f}, {4});
  z.set_requires_grad(true);
  backward(relu(z), Tensor::from_vector<float>({nan, inf, nan, 2.f}, {4}));
  EXPECT_EQ(z.grad().to_vector<float>(), (std::vector<float>{0.f, 0.f, 0.f, 2.f}));
}
