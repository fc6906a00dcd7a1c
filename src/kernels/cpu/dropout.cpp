#include "qkv/kernels/dropout.h"

#include <algorithm>

#include "qkv/kernels/elementwise.h"
#include "qkv/tensor/rng.h"

#include "dispatch.h"

namespace qkv::kernels {
namespace {

// Draws the keep mask of elements [lo, hi) (lo a multiple of 4) into kp[lo, hi).
void keep_chunk(uint8_t* __restrict kp, int64_t lo, int64_t hi, float p, uint64_t seed, uint64_t base) {
  uint32_t r[kMaskChunk];
  philox4x32_blocks(seed, 0, base + uint64_t(lo / 4), (hi - lo + 3) / 4, r);
#pragma omp simd
  for (int64_t i = 0; i < hi - lo; ++i) kp[lo + i] = u32_to_unit_float(r[i]) >= p;
}

// Draws the mask of n elements at generator counter `base` into keep (u8) chunk by chunk and
// calls body(lo, hi) on each chunk right after its draw.
template <typename Body>
void masked_pass(Tensor& keep, double p, uint64_t seed, uint64_t base, Body&& body) {
  uint8_t* kp = keep.data<uint8_t>();
  const int64_t n = keep.numel(), chunks = (n + kMaskChunk - 1) / kMaskChunk;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t lo = c * kMaskChunk, hi = std::min(n, lo + kMaskChunk);
    keep_chunk(kp, lo, hi, float(p), seed, base);
    body(lo, hi);
  }
}

// The per-chunk loops, as functions with restrict pointers (u8 stores may alias anything; inside
// a lambda GCC then reloads every capture per element and does not vectorise).
template <typename T>
void dropout_chunk(const T* __restrict x, const uint8_t* __restrict keep, T* __restrict out, int64_t lo, int64_t hi,
                   T s) {
#pragma omp simd
  for (int64_t i = lo; i < hi; ++i) out[i] = keep[i] ? x[i] * s : T(0);
}

// out = keep ? relu(x) * s : 0, then keep &= !(x <= 0) for the backward: bit for bit dropout(relu(x)),
// where relu keeps a NaN and a -0 (torch.relu) and a dropped element is +0 as in dropout_chunk.
template <typename T>
void relu_dropout_chunk(const T* __restrict x, uint8_t* __restrict keep, T* __restrict out, int64_t lo, int64_t hi,
                        T s) {
#pragma omp simd
  for (int64_t i = lo; i < hi; ++i) {
    out[i] = keep[i] ? (x[i] < T(0) ? T(0) : x[i]) * s : T(0);
    keep[i] = uint8_t(keep[i] & uint8_t(!(x[i] <= T(0))));
  }
}

template <typename T>
void add_dropout_chunk(const T* __restrict x, const T* __restrict y, const uint8_t* __restrict keep, T* __restrict out,
                       int64_t lo, int64_t hi, T s) {
#pragma omp simd
  for (int64_t i = lo; i < hi; ++i) out[i] = x[i] + (keep[i] ? y[i] * s : T(0));
}

}  // namespace

void dropout_keep_mask(Tensor& keep, double p, uint64_t seed, uint64_t base) {
  uint8_t* kp = keep.data<uint8_t>();
  const int64_t n = keep.numel(), chunks = (n + kMaskChunk - 1) / kMaskChunk;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t c = 0; c < chunks; ++c) keep_chunk(kp, c * kMaskChunk, std::min(n, (c + 1) * kMaskChunk), float(p), seed, base);
}

void dropout_forward(const Tensor& x, double p, uint64_t seed, uint64_t base, Tensor& keep, Tensor& out) {
  dispatch_float(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    const uint8_t* kp = keep.data<uint8_t>();
    T* o = out.data<T>();
    const T s = T(1.0 / (1.0 - p));
    masked_pass(keep, p, seed, base, [&](int64_t lo, int64_t hi) { dropout_chunk(xp, kp, o, lo, hi, s); });
  });
}

void relu_dropout_forward(const Tensor& x, double p, uint64_t seed, uint64_t base, Tensor& keep, Tensor& out) {
  dispatch_float(x.dtype(), "relu_dropout", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    uint8_t* kp = keep.data<uint8_t>();
    T* o = out.data<T>();
    const T s = T(1.0 / (1.0 - p));
    masked_pass(keep, p, seed, base, [&](int64_t lo, int64_t hi) { relu_dropout_chunk(xp, kp, o, lo, hi, s); });
  });
}

void add_dropout_forward(const Tensor& x, const Tensor& y, double p, uint64_t seed, uint64_t base, Tensor& keep,
                         Tensor& out) {
  dispatch_float(y.dtype(), "add_dropout", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    const T* yp = y.data<T>();
    const uint8_t* kp = keep.data<uint8_t>();
    T* o = out.data<T>();
    const T s = T(1.0 / (1.0 - p));
    masked_pass(keep, p, seed, base, [&](int64_t lo, int64_t hi) { add_dropout_chunk(xp, yp, kp, o, lo, hi, s); });
  });
}

void apply_keep_mask(const Tensor& x, const Tensor& keep, double scale, Tensor& out) {
  dispatch_float(x.dtype(), "dropout backward", [&](auto tag) {
    using T = decltype(tag);
    const T* __restrict xp = x.data<T>();
    const uint8_t* __restrict kp = keep.data<uint8_t>();
    T* __restrict o = out.data<T>();
    const T s = T(scale);
    const int64_t n = x.numel();
#pragma omp parallel for simd schedule(static) if (parallel : n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) o[i] = kp[i] ? xp[i] * s : T(0);
  });
}

}  // namespace qkv::kernels
