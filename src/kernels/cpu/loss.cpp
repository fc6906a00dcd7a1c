#include "qkv/kernels/loss.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "qkv/kernels/elementwise.h"
#include "qkv/kernels/softmax.h"

#include "dispatch.h"
#include "row_max.h"

namespace qkv::kernels {
namespace {

// A row's loss from its logsumexp l, its target's logit xt and the sum sx of its C logits:
// (1 - eps) (l - xt) + eps (l - sx / C), the smoothed negative log-likelihood. Called with all three
// less the row's max (l = log sum exp(x - max)): x - max is exact near the max, where l - xt with
// l = max + log sum rounded l to the logits' magnitude (3e-4 off at logits of 1e4).
template <typename T>
inline T row_loss(T l, T xt, T sx, T eps, int64_t C) {
  const T nll = l - xt;
  return eps == T(0) ? nll : (T(1) - eps) * nll + eps * (l - sx / T(C));
}

}  // namespace

void cross_entropy_forward(const Tensor& logits, const int64_t* targets, int64_t ignore_index, double smoothing,
                           Tensor& loss, Tensor& stats) {
  dispatch_float(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    int64_t C = logits.shape().back();
    int64_t N = logits.numel() / C;
    QKV_CHECK(stats.numel() == 2 * N && loss.numel() == N, "cross_entropy", "expected loss (", N, ") and stats (",
              N, ", 2), got ", loss.str(), " and ", stats.str());
    const T* xp = logits.data<T>();
    T* lp = loss.data<T>();
    T* sp = stats.data<T>();
    T eps = T(smoothing);
#pragma omp parallel for schedule(static) if (N * C >= kParallelGrain && N > 1)
    for (int64_t i = 0; i < N; ++i) {
      const T* x = xp + i * C;
      const T mx = row_max(x, C);
      T s = 0, sx = 0;
#pragma omp simd reduction(+ : s, sx)
      for (int64_t j = 0; j < C; ++j) {
        s += vexp(x[j] - mx);
        sx += x[j] - mx;
      }
      const T ls = std::log(s);
      sp[2 * i] = mx, sp[2 * i + 1] = ls;
      int64_t t = targets[i];
      if (t == ignore_index) {
        lp[i] = T(0);
        continue;
      }
      lp[i] = row_loss(ls, x[t] - mx, sx, eps, C);
    }
  });
}

void cross_entropy_backward(const Tensor& logits, const int64_t* targets, const Tensor& stats, int64_t ignore_index,
                            double smoothing, const Tensor& gy, double factor, Tensor& gx) {
  dispatch_float(logits.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    int64_t C = logits.shape().back();
    int64_t N = logits.numel() / C;
    const T* xp = logits.data<T>();
    QKV_CHECK(stats.numel() == 2 * N, "cross_entropy_backward", "expected stats (", N, ", 2), got ", stats.str());
    const T* sp = stats.data<T>();
    const T* gp = gy.data<T>();
    bool per_row = gy.numel() == N;
    T* o = gx.data<T>();
    T eps = T(smoothing), off = eps / T(C);
#pragma omp parallel for schedule(static) if (N * C >= kParallelGrain && N > 1)
    for (int64_t i = 0; i < N; ++i) {
      T* g = o + i * C;
      int64_t t = targets[i];
      if (t == ignore_index) {
        for (int64_t j = 0; j < C; ++j) g[j] = T(0);
        continue;
      }
      T scale = (per_row ? gp[i] : gp[0]) * T(factor);
      const T* x = xp + i * C;
      const T mx = sp[2 * i], ls = sp[2 * i + 1];
#pragma omp simd
      for (int64_t j = 0; j < C; ++j) g[j] = scale * (vexp((x[j] - mx) - ls) - off);
      g[t] -= scale * (T(1) - eps);
    }
  });
}

void cross_entropy_forward_backward(Tensor& logits, const int64_t* targets, int64_t ignore_index, double smoothing,
                                    double factor, Tensor& loss, Tensor& stats) {
  dispatch_float(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    const int64_t C = logits.shape().back(), N = logits.numel() / C;
    T* xp = logits.data<T>();
    T* lp = loss.data<T>();
    QKV_CHECK(stats.numel() == 2 * N && loss.numel() == N, "cross_entropy", "expected loss (", N, ") and stats (",
              N, ", 2), got ", loss.str(), " and ", stats.str());
    T* sp = stats.data<T>();
    const T eps = T(smoothing), f = T(factor), off = f * (eps / T(C));
#pragma omp parallel for schedule(static) if (N * C >= kParallelGrain && N > 1)
    for (int64_t i = 0; i < N; ++i) {
      T* x = xp + i * C;
      const int64_t t = targets[i];
      const T mx = row_max(x, C), xt = t == ignore_index ? T(0) : x[t] - mx;
      T s = 0, sx = 0;
#pragma omp simd reduction(+ : s, sx)
      for (int64_t j = 0; j < C; ++j) {  // x_j -> exp(x_j - max), in place
        const T e = vexp(x[j] - mx);
        sx += x[j] - mx;
        x[j] = e;
        s += e;
      }
      const T ls = std::log(s);
      sp[2 * i] = mx, sp[2 * i + 1] = ls;
      if (t == ignore_index) {
        lp[i] = T(0);
        std::fill(x, x + C, T(0));
        continue;
      }
      lp[i] = row_loss(ls, xt, sx, eps, C);
      const T r = f / s;  // factor * p_j = factor * exp(x_j - max) / sum
#pragma omp simd
      for (int64_t j = 0; j < C; ++j) x[j] = x[j] * r - off;
      x[t] -= f * (T(1) - eps);
    }
  });
}

void nll_forward(const Tensor& logp, const int64_t* targets, int64_t ignore_index, Tensor& rows) {
  dispatch_float(logp.dtype(), "nll_loss", [&](auto tag) {
    using T = decltype(tag);
    const int64_t C = logp.shape().back(), N = rows.numel();
    const T* lp = logp.data<T>();
    T* r = rows.data<T>();
    for (int64_t i = 0; i < N; ++i) r[i] = targets[i] == ignore_index ? T(0) : -lp[i * C + targets[i]];
  });
}

void nll_backward(const int64_t* targets, int64_t ignore_index, const Tensor& gy, double factor, Tensor& gx) {
  // loss_i = -logp[i, t_i]  ->  dlogp[i, t_i] = -gy_i * factor
  dispatch_float(gx.dtype(), "nll_loss backward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t C = gx.shape().back(), N = gx.numel() / C;
    const bool per_row = gy.numel() == N;
    const T* gp = gy.data<T>();
    T* o = gx.data<T>();
    for (int64_t i = 0; i < N; ++i)
      if (targets[i] != ignore_index) o[i * C + targets[i]] = -(per_row ? gp[i] : gp[0]) * T(factor);
  });
}

}  // namespace qkv::kernels
