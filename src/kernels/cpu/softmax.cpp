#include "qkv/kernels/softmax.h"

#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "qkv/kernels/elementwise.h"
#include "qkv/tensor/strided.h"

#include "dispatch.h"
#include "row_max.h"

namespace qkv::kernels {
namespace {

// Per-row access to a broadcast mask view of x's shape.
struct RowMask {
  const void* base = nullptr;
  bool is_bool = false;
  Shape outer, strides;  // outer = x's shape with the last extent set to 1
  int64_t inner_stride = 0;

  explicit RowMask(const Tensor& m) {
    if (!m.defined()) return;
    base = m.raw_data();
    is_bool = m.dtype() == DType::u8 || m.dtype() == DType::boolean;
    outer = m.shape();
    strides = m.strides();
    int nd = outer.ndim();
    inner_stride = strides[nd - 1];
    outer[nd - 1] = 1;
  }
  int64_t offset(int64_t row) const { return strided_offset(row, outer, strides); }
};

// Runs body(row) over rows, in parallel when the tensor is large.
template <typename Body>
void for_rows(int64_t rows, int64_t C, Body&& body) {
#pragma omp parallel for schedule(static) if (rows * C >= kParallelGrain && rows > 1)
  for (int64_t r = 0; r < rows; ++r) body(r);
}

// v = x with the mask applied, for one row.
template <typename T>
void masked_row(const T* x, const RowMask& m, int64_t row, int64_t C, T* v) {
  int64_t off = m.offset(row), s = m.inner_stride;
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  if (m.is_bool) {
    const uint8_t* mp = static_cast<const uint8_t*>(m.base) + off;
    for (int64_t j = 0; j < C; ++j) v[j] = mp[j * s] ? kNegInf : x[j];
  } else {
    const T* ap = static_cast<const T*>(m.base) + off;
    for (int64_t j = 0; j < C; ++j) v[j] = x[j] + ap[j * s];
  }
}

// Softmax / log_softmax of one row v into y (v may alias y).
template <typename T>
void softmax_row(const T* v, int64_t C, bool log, T* y) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  const T mx = row_max(v, C);
  if (mx == kNegInf) {  // fully masked: probabilities 0, log-probabilities -inf
    T fill = log ? kNegInf : T(0);
    for (int64_t j = 0; j < C; ++j) y[j] = fill;
    return;
  }
  T s = 0;
  if (log) {
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < C; ++j) s += vexp(v[j] - mx);
    T lse = mx + std::log(s);
#pragma omp simd
    for (int64_t j = 0; j < C; ++j) y[j] = v[j] - lse;
  } else {
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < C; ++j) {
      T e = vexp(v[j] - mx);
      y[j] = e;
      s += e;
    }
    T inv = T(1) / s;
#pragma omp simd
    for (int64_t j = 0; j < C; ++j) y[j] *= inv;
  }
}

// Outputs at least this large are written with streaming (non-temporal) stores: they do not fit
// the caches, and a normal store first reads each output line from memory (write-allocate),
// a third of the traffic of a read-x / write-y kernel.
constexpr int64_t kStreamBytes = int64_t(16) << 20;

// softmax_row for an f32 row written with streaming stores: y 64-byte aligned, C % 16 == 0, no
// mask. The exp pass goes to `scratch` (C floats, stays in L1), never to y.
void softmax_row_stream(const float* v, int64_t C, bool log, float* scratch, float* y) {
#if defined(__AVX512F__)
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const float mx = row_max(v, C);
  if (mx == kNegInf) {  // fully masked: probabilities 0, log-probabilities -inf
    const __m512 fill = _mm512_set1_ps(log ? kNegInf : 0.f);
    for (int64_t j = 0; j < C; j += 16) _mm512_stream_ps(y + j, fill);
    return;
  }
  float s = 0;
  if (log) {
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < C; ++j) s += vexp(v[j] - mx);
    const __m512 lse = _mm512_set1_ps(mx + std::log(s));
    for (int64_t j = 0; j < C; j += 16) _mm512_stream_ps(y + j, _mm512_sub_ps(_mm512_loadu_ps(v + j), lse));
  } else {
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < C; ++j) {
      float e = vexp(v[j] - mx);
      scratch[j] = e;
      s += e;
    }
    const __m512 inv = _mm512_set1_ps(1.f / s);
    for (int64_t j = 0; j < C; j += 16) _mm512_stream_ps(y + j, _mm512_mul_ps(_mm512_loadu_ps(scratch + j), inv));
  }
#else
  (void)scratch;
  softmax_row(v, C, log, y);
#endif
}

}  // namespace

void softmax_forward(const Tensor& x, const Tensor& mask, bool log, Tensor& out) {
  dispatch_float(x.dtype(), log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = decltype(tag);
    int64_t C = x.ndim() ? x.shape().back() : 1;
    if (x.numel() == 0 || C == 0) return;
    int64_t rows = x.numel() / C;
    const T* xp = x.data<T>();
    T* yp = out.data<T>();
    RowMask m(mask);
    if constexpr (std::is_same_v<T, float>) {
      const bool stream = !m.base && C % 16 == 0 && C <= 16384 && reinterpret_cast<uintptr_t>(yp) % 64 == 0 &&
                          out.numel() * int64_t(sizeof(float)) >= kStreamBytes;
      if (stream) {
#pragma omp parallel if (rows > 1)
        {
          std::vector<float> scratch(static_cast<size_t>(C));
#pragma omp for schedule(static)
          for (int64_t r = 0; r < rows; ++r) softmax_row_stream(xp + r * C, C, log, scratch.data(), yp + r * C);
#if defined(__AVX512F__)
          _mm_sfence();  // streaming stores are weakly ordered: each thread fences its own
#endif
        }
        return;
      }
    }
    for_rows(rows, C, [&](int64_t r) {
      const T* xr = xp + r * C;
      T* yr = yp + r * C;
      if (m.base) {
        masked_row(xr, m, r, C, yr);
        softmax_row(yr, C, log, yr);
      } else {
        softmax_row(xr, C, log, yr);
      }
    });
  });
}

void softmax_backward(const Tensor& y, const Tensor& gy, const Tensor& mask, bool log, Tensor& gx) {
  dispatch_float(y.dtype(), log ? "log_softmax_backward" : "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    int64_t C = y.ndim() ? y.shape().back() : 1;
    if (y.numel() == 0 || C == 0) return;
    int64_t rows = y.numel() / C;
    const T* yp = y.data<T>();
    const T* gp = gy.data<T>();
    T* out = gx.data<T>();
    RowMask m(mask);
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    for_rows(rows, C, [&](int64_t r) {
      const T* yr = yp + r * C;
      const T* gr = gp + r * C;
      T* o = out + r * C;
      if (log) {
        T s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < C; ++j) s += gr[j];
        if (row_max(yr, C) == kNegInf) {  // fully masked row
          for (int64_t j = 0; j < C; ++j) o[j] = T(0);
          return;
        }
#pragma omp simd
        for (int64_t j = 0; j < C; ++j) o[j] = gr[j] - vexp(yr[j]) * s;
        if (m.base && m.is_bool) {  // masked logits did not reach the output
          const uint8_t* mp = static_cast<const uint8_t*>(m.base) + m.offset(r);
          for (int64_t j = 0; j < C; ++j)
            if (mp[j * m.inner_stride]) o[j] = T(0);
        }
      } else {
        T dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j < C; ++j) dot += gr[j] * yr[j];
#pragma omp simd
        for (int64_t j = 0; j < C; ++j) o[j] = yr[j] * (gr[j] - dot);
      }
    });
  });
}

}  // namespace qkv::kernels
