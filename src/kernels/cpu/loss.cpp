#include "qkv/kernels/loss.h"

#include <cmath>
#include <limits>

#include "qkv/kernels/elementwise.h"
#include "qkv/kernels/softmax.h"

#include "dispatch.h"

namespace qkv::kernels {

void cross_entropy_forward(const Tensor& logits, const int64_t* targets, int64_t ignore_index, double smoothing,
                           Tensor& loss, Tensor& lse) {
  dispatch_float(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    int64_t C = logits.shape().back();
    int64_t N = logits.numel() / C;
    const T* xp = logits.data<T>();
    T* lp = loss.data<T>();
    T* sp = lse.data<T>();
    T eps = T(smoothing);
#pragma omp parallel for schedule(static) if (N * C >= kParallelGrain && N > 1)
    for (int64_t i = 0; i < N; ++i) {
      const T* x = xp + i * C;
      T mx = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : mx)
      for (int64_t j = 0; j < C; ++j) mx = x[j] > mx ? x[j] : mx;
      T s = 0, sx = 0;
#pragma omp simd reduction(+ : s, sx)
      for (int64_t j = 0; j < C; ++j) {
        s += vexp(x[j] - mx);
        sx += x[j];
      }
      T l = mx + std::log(s);
      sp[i] = l;
      int64_t t = targets[i];
      if (t == ignore_index) {
        lp[i] = T(0);
        continue;
      }
      T nll = l - x[t];
      lp[i] = eps == T(0) ? nll : (T(1) - eps) * nll + eps * (l - sx / T(C));
    }
  });
}

void cross_entropy_backward(const Tensor& logits, const int64_t* targets, const Tensor& lse, int64_t ignore_index,
                            double smoothing, const Tensor& gy, double factor, Tensor& gx) {
  dispatch_float(logits.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    int64_t C = logits.shape().back();
    int64_t N = logits.numel() / C;
    const T* xp = logits.data<T>();
    const T* sp = lse.data<T>();
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
      T l = sp[i];
#pragma omp simd
      for (int64_t j = 0; j < C; ++j) g[j] = scale * (vexp(x[j] - l) - off);
      g[t] -= scale * (T(1) - eps);
    }
  });
}

}  // namespace qkv::kernels
