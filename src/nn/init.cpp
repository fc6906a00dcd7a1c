#include "qkv/nn/init.h"

#include <cmath>

namespace qkv::nn::init {

namespace {
void check(const Tensor& t, const char* op) {
  QKV_CHECK(t.defined() && t.is_contiguous() && (t.dtype() == DType::f32 || t.dtype() == DType::f64), op,
            "needs a contiguous f32/f64 tensor, got ", t.str());
}
}  // namespace

void uniform(Tensor& t, double lo, double hi, Generator& g) {
  check(t, "init::uniform");
  if (t.dtype() == DType::f32) g.uniform(t.data<float>(), t.numel(), float(lo), float(hi));
  else g.uniform(t.data<double>(), t.numel(), lo, hi);
  t.mark_modified();
}

void normal(Tensor& t, double mean, double std, Generator& g) {
  check(t, "init::normal");
  if (t.dtype() == DType::f32) g.normal(t.data<float>(), t.numel(), float(mean), float(std));
  else g.normal(t.data<double>(), t.numel(), mean, std);
  t.mark_modified();
}

void constant(Tensor& t, double value) { t.fill(value); }

std::pair<int64_t, int64_t> fans(const Tensor& t) {
  QKV_CHECK(t.ndim() >= 1, "init::fans", "needs at least 1 dim, got ", t.str());
  if (t.ndim() == 1) return {t.size(0), t.size(0)};
  int64_t receptive = 1;
  for (int i = 2; i < t.ndim(); ++i) receptive *= t.size(i);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

void xavier_uniform(Tensor& t, double gain, Generator& g) {
  auto [fi, fo] = fans(t);
  double a = gain * std::sqrt(6.0 / double(fi + fo));
  uniform(t, -a, a, g);
}

void kaiming_uniform_linear(Tensor& t, Generator& g) {
  auto [fi, fo] = fans(t);
  double a = fi > 0 ? 1.0 / std::sqrt(double(fi)) : 0.0;
  uniform(t, -a, a, g);
}

}  // namespace qkv::nn::init
