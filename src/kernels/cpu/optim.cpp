// Fused optimizer loops (qkv/kernels/optim.h). Each loop body restates the torch 1.13 line it
// mirrors; the per-step scalars are computed in double and rounded to T once, as ATen does.
#include "qkv/kernels/optim.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "qkv/kernels/elementwise.h"

namespace qkv::kernels {
namespace {

template <typename Fn>
void dispatch_float(DType t, const char* op, Fn&& fn) {
  switch (t) {
    case DType::f32: fn(float{}); return;
    case DType::f64: fn(double{}); return;
    default: fail(op, "dtype ", dtype_name(t), " is not supported (f32, f64)");
  }
}

template <typename T>
void adam_loop(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v,
               T* __restrict vmax, int64_t n, const AdamStep& h) {
  const double bc1 = 1.0 - std::pow(h.beta1, double(h.step));
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(h.beta2, double(h.step)));
  const T b1 = T(h.beta1), one_m_b1 = T(1.0 - h.beta1);
  const T b2 = T(h.beta2), one_m_b2 = T(1.0 - h.beta2);
  const T wd = T(h.weight_decay);
  const T decay = T(1.0 - h.lr * h.weight_decay);  // AdamW: param.mul_(1 - lr * wd)
  const T neg_step = T(-(h.lr / bc1));              // addcdiv_ value = -lr / bc1
  const T bc2s = T(bc2_sqrt), eps = T(h.eps);
  const bool l2 = !h.decoupled && h.weight_decay != 0, dec = h.decoupled && h.weight_decay != 0;
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    T pi = p[i], gi = g[i];
    if (l2) gi = gi + wd * pi;          // grad = grad.add(param, alpha=wd)
    if (dec) pi = pi * decay;           // param.mul_(1 - lr * wd)
    T mi = m[i] * b1;                   // exp_avg.mul_(beta1)
    mi = mi + one_m_b1 * gi;            //        .add_(grad, alpha=1 - beta1)
    T vi = v[i] * b2;                   // exp_avg_sq.mul_(beta2)
    vi = vi + one_m_b2 * (gi * gi);     //           .addcmul_(grad, grad, value=1 - beta2)
    T vd = vi;
    if (vmax) {                         // amsgrad: max_exp_avg_sq = max(max_exp_avg_sq, v)
      vd = vmax[i] > vi ? vmax[i] : vi;
      vmax[i] = vd;
    }
    T denom = std::sqrt(vd) / bc2s + eps;  // (v.sqrt() / bc2_sqrt).add_(eps)
    p[i] = pi + neg_step * (mi / denom);   // param.addcdiv_(exp_avg, denom, value=-step_size)
    m[i] = mi;
    v[i] = vi;
  }
}

template <typename T>
void sgd_loop(T* __restrict p, const T* __restrict g, T* __restrict buf, int64_t n, const SgdStep& h) {
  const T wd = T(h.weight_decay), mom = T(h.momentum), one_m_damp = T(1.0 - h.dampening);
  const T neg_lr = T(-h.lr);
  const bool decay = h.weight_decay != 0, use_mom = h.momentum != 0;
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    T pi = p[i];
    T d = g[i];
    if (decay) d = d + wd * pi;          // d_p = d_p.add(param, alpha=wd)
    if (use_mom) {
      T b = h.first ? d                  // buf = clone(d_p)
                    : buf[i] * mom + one_m_damp * d;  // buf.mul_(mom).add_(d_p, alpha=1 - damp)
      buf[i] = b;
      d = h.nesterov ? d + mom * b : b;  // d_p = d_p.add(buf, alpha=mom) or buf
    }
    p[i] = pi + neg_lr * d;              // param.add_(d_p, alpha=-lr)
  }
}

}  // namespace

void adam_update(Tensor& p, const Tensor& g, Tensor& m, Tensor& v, Tensor* vmax, const AdamStep& h) {
  dispatch_float(p.dtype(), "adam_update", [&](auto tag) {
    using T = decltype(tag);
    adam_loop<T>(p.data<T>(), g.data<T>(), m.data<T>(), v.data<T>(),
                 h.amsgrad && vmax ? vmax->data<T>() : nullptr, p.numel(), h);
  });
}

void sgd_update(Tensor& p, const Tensor& g, Tensor& buf, const SgdStep& h) {
  dispatch_float(p.dtype(), "sgd_update", [&](auto tag) {
    using T = decltype(tag);
    sgd_loop<T>(p.data<T>(), g.data<T>(), h.momentum != 0 ? buf.data<T>() : nullptr, p.numel(), h);
  });
}

double sum_squares_deterministic(const Tensor& x_in) {
  Tensor x = x_in.contiguous();
  double total = 0;
  dispatch_float(x.dtype(), "sum_squares", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    const int64_t n = x.numel(), nb = (n + kSumBlock - 1) / kSumBlock;
    std::vector<double> partial(size_t(nb), 0.0);
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t lo = b * kSumBlock, hi = std::min(n, lo + kSumBlock);
      double s = 0;
      for (int64_t i = lo; i < hi; ++i) s += double(px[i]) * double(px[i]);
      partial[size_t(b)] = s;
    }
    for (double s : partial) total += s;
  });
  return total;
}

}  // namespace qkv::kernels
