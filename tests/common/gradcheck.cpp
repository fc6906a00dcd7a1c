#include "gradcheck.h"

#include <cmath>

#include "qkv/autograd/node.h"
#include "ref.h"

namespace qkv::testing {

namespace {
double project(const Tensor& y, const Tensor& r) {
  std::vector<double> a = y.to_vector<double>(), b = r.to_vector<double>();
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}
}  // namespace

::testing::AssertionResult gradcheck(const TensorFn& f, std::vector<Tensor> inputs, double eps, double atol,
                                     double rtol) {
  for (auto& x : inputs) {
    if (!x.defined() || x.dtype() != DType::f64) continue;
    x = x.contiguous().clone();
    x.set_requires_grad(true);
  }
  Tensor y = f(inputs);
  Tensor r = randn(y.shape(), 1234, DType::f64);
  backward(y, r);
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor x = inputs[k];
    if (!x.defined() || x.dtype() != DType::f64) continue;
    Tensor g = x.grad();
    if (!g.defined()) return ::testing::AssertionFailure() << "input " << k << " got no gradient";
    std::vector<double> ga = g.to_vector<double>();
    double* p = x.data<double>();
    NoGradGuard ng;
    for (int64_t i = 0; i < x.numel(); ++i) {
      double orig = p[i];
      p[i] = orig + eps;
      double lp = project(f(inputs), r);
      p[i] = orig - eps;
      double lm = project(f(inputs), r);
      p[i] = orig;
      double num = (lp - lm) / (2 * eps);
      if (!(std::abs(ga[size_t(i)] - num) <= atol + rtol * std::abs(num)))
        return ::testing::AssertionFailure() << "input " << k << " element " << i << ": analytic " << ga[size_t(i)]
                                             << " vs numeric " << num;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace qkv::testing
