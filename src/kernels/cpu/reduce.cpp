#include "qkv/kernels/reduce.h"

#include <vector>

#include "qkv/kernels/elementwise.h"

#include "dispatch.h"

namespace qkv::kernels {
namespace {

// Fixed chunk of a single long sum: partials are per chunk, so the order is thread-independent.
constexpr int64_t kSumChunk = 16384;

template <typename T>
double sum_contiguous(const T* p, int64_t n) {
  double acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) acc += double(p[i]);
  return acc;
}

}  // namespace

void sum_block(const Tensor& x, int64_t outer, int64_t R, int64_t inner, double scale, Tensor& out) {
  dispatch_float(x.dtype(), "sum", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* op = out.data<T>();
    int64_t total = outer * R * inner;
    if (inner == 1) {
      if (outer == 1 && R > kSumChunk) {  // one long sum: chunk partials, added in order
        int64_t chunks = (R + kSumChunk - 1) / kSumChunk;
        std::vector<double> part(size_t(chunks), 0.0);
#pragma omp parallel for schedule(static) if (R >= kParallelGrain)
        for (int64_t c = 0; c < chunks; ++c) {
          int64_t lo = c * kSumChunk, hi = std::min(R, lo + kSumChunk);
          part[size_t(c)] = sum_contiguous(xp + lo, hi - lo);
        }
        double acc = 0;
        for (double v : part) acc += v;
        op[0] = T(acc * scale);
        return;
      }
#pragma omp parallel for schedule(static) if (total >= kParallelGrain && outer > 1)
      for (int64_t o = 0; o < outer; ++o) op[o] = T(sum_contiguous(xp + o * R, R) * scale);
      return;
    }
    // inner > 1: accumulate rows of `inner` into a double buffer, tiled over inner.
    constexpr int64_t kTile = 512;
    int64_t tiles = (inner + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (total >= kParallelGrain && outer * tiles > 1)
    for (int64_t job = 0; job < outer * tiles; ++job) {
      int64_t o = job / tiles, i0 = (job % tiles) * kTile, n = std::min(kTile, inner - i0);
      double acc[kTile];
      for (int64_t i = 0; i < n; ++i) acc[i] = 0;
      for (int64_t r = 0; r < R; ++r) {
        const T* row = xp + (o * R + r) * inner + i0;
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) acc[i] += double(row[i]);
      }
      T* orow = op + o * inner + i0;
      for (int64_t i = 0; i < n; ++i) orow[i] = T(acc[i] * scale);
    }
  });
}

void max_block(const Tensor& x, int64_t outer, int64_t R, int64_t inner, Tensor* values, Tensor& indices) {
  dispatch_float(x.dtype(), "max", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* vp = values ? values->data<T>() : nullptr;
    int64_t* ip = indices.data<int64_t>();
    int64_t n_out = outer * inner;
#pragma omp parallel for schedule(static) if (n_out * R >= kParallelGrain && n_out > 1)
    for (int64_t k = 0; k < n_out; ++k) {
      int64_t o = k / inner, i = k % inner;
      const T* p = xp + o * R * inner + i;
      T best = p[0];
      int64_t arg = 0;
      for (int64_t r = 1; r < R && best == best; ++r) {  // stops at the first NaN
        T v = p[r * inner];
        if (v > best || v != v) { best = v; arg = r; }
      }
      if (vp) vp[k] = best;
      ip[k] = arg;
    }
  });
}

void max_block_backward(const Tensor& gy, const Tensor& indices, int64_t outer, int64_t R, int64_t inner,
                        Tensor& gx) {
  dispatch_float(gy.dtype(), "max_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* gp = gy.data<T>();
    const int64_t* ip = indices.data<int64_t>();
    T* out = gx.data<T>();
    int64_t n = outer * R * inner;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
    for (int64_t j = 0; j < n; ++j) out[j] = T(0);
    for (int64_t k = 0; k < outer * inner; ++k) {
      int64_t o = k / inner, i = k % inner;
      out[(o * R + ip[k]) * inner + i] = gp[k];
    }
  });
}

}  // namespace qkv::kernels
