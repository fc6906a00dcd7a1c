#include "qkv/ops/dropout.h"

#include <algorithm>

#include "qkv/autograd/node.h"
#include "qkv/kernels/elementwise.h"
#include "qkv/ops/elementwise.h"

namespace qkv {
namespace {

template <typename Fn>
void dispatch_float(DType t, Fn&& fn) {
  if (t == DType::f32) fn(float{});
  else fn(double{});
}

// out = x * keep * scale (all contiguous, keep u8).
void apply_mask(const Tensor& x, const Tensor& keep, double scale, Tensor& out) {
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* __restrict xp = x.data<T>();
    const uint8_t* __restrict kp = keep.data<uint8_t>();
    T* __restrict o = out.data<T>();
    T s = T(scale);
    int64_t n = x.numel();
#pragma omp parallel for simd schedule(static) if (n >= kernels::kParallelGrain)
    for (int64_t i = 0; i < n; ++i) o[i] = kp[i] ? xp[i] * s : T(0);
  });
}

struct DropoutBackward : Node {  // y = x * keep / (1 - p)
  Tensor keep;                   // u8, x's shape
  double scale = 1;
  const char* name() const override { return "DropoutBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    Tensor gx = Tensor::empty(keep.shape(), g[0].dtype());
    apply_mask(g[0].contiguous(), keep, scale, gx);
    return {gx};
  }
  void release_saved() override { keep = Tensor(); }
};

constexpr int64_t kMaskChunk = 4096;  // elements per mask draw (a multiple of 4: whole Philox blocks)

// Draws the keep mask of elements [lo, hi) (lo a multiple of 4) into kp[lo, hi).
void keep_chunk(uint8_t* __restrict kp, int64_t lo, int64_t hi, float p, uint64_t seed, uint64_t base) {
  uint32_t r[kMaskChunk];
  philox4x32_blocks(seed, 0, base + uint64_t(lo / 4), (hi - lo + 3) / 4, r);
#pragma omp simd
  for (int64_t i = 0; i < hi - lo; ++i) kp[lo + i] = u32_to_unit_float(r[i]) >= p;
}

// Draws the mask of n elements at generator counter `base` into keep (u8) chunk by chunk and
// calls body(lo, hi) on each chunk right after its draw, while the chunk is in L1.
template <typename Body>
void masked_pass(Tensor& keep, double p, uint64_t seed, uint64_t base, Body&& body) {
  uint8_t* kp = keep.data<uint8_t>();
  const int64_t n = keep.numel(), chunks = (n + kMaskChunk - 1) / kMaskChunk;
#pragma omp parallel for schedule(static) if (n >= kernels::kParallelGrain)
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

template <typename T>  // keep &= (x > 0); out = keep ? x * s : 0
void relu_dropout_chunk(const T* __restrict x, uint8_t* __restrict keep, T* __restrict out, int64_t lo, int64_t hi,
                        T s) {
#pragma omp simd
  for (int64_t i = lo; i < hi; ++i) {
    const uint8_t pass = uint8_t(keep[i] & uint8_t(x[i] > T(0)));
    keep[i] = pass;
    out[i] = pass ? x[i] * s : T(0);
  }
}

template <typename T>
void add_dropout_chunk(const T* __restrict x, const T* __restrict y, const uint8_t* __restrict keep, T* __restrict out,
                       int64_t lo, int64_t hi, T s) {
#pragma omp simd
  for (int64_t i = lo; i < hi; ++i) out[i] = x[i] + (keep[i] ? y[i] * s : T(0));
}

void check_p(const Tensor& x, double p, const char* op) {
  check_floating(x, op, "x");
  QKV_CHECK(p >= 0.0 && p < 1.0, op, "p must be in [0, 1), got ", p);
}

struct AddDropoutBackward : Node {  // out = x + y * keep / (1 - p)
  Tensor keep;
  double scale = 1;
  const char* name() const override { return "AddDropoutBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    Tensor gy;
    if (next[1].valid()) {
      gy = Tensor::empty(keep.shape(), g[0].dtype());
      apply_mask(g[0].contiguous(), keep, scale, gy);
    }
    return {next[0].valid() ? g[0] : Tensor(), gy};
  }
  void release_saved() override { keep = Tensor(); }
};

}  // namespace

Tensor dropout_keep_mask(const Shape& shape, double p, uint64_t seed, uint64_t base) {
  Tensor keep = Tensor::empty(shape, DType::u8);
  uint8_t* kp = keep.data<uint8_t>();
  const int64_t n = shape.numel(), chunks = (n + kMaskChunk - 1) / kMaskChunk;
#pragma omp parallel for schedule(static) if (n >= kernels::kParallelGrain)
  for (int64_t c = 0; c < chunks; ++c)
    keep_chunk(kp, c * kMaskChunk, std::min(n, (c + 1) * kMaskChunk), float(p), seed, base);
  return keep;
}

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  check_p(x, p, "dropout");
  if (!training || p == 0.0) return x;
  const uint64_t base = gen.reserve(uint64_t(x.numel()));
  const double scale = 1.0 / (1.0 - p);
  const Tensor xc = x.contiguous();
  Tensor keep = Tensor::empty(x.shape(), DType::u8);
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = xc.data<T>();
    const uint8_t* kp = keep.data<uint8_t>();
    T* o = out.data<T>();
    const T s = T(scale);
    masked_pass(keep, p, gen.seed(), base, [&](int64_t lo, int64_t hi) { dropout_chunk(xp, kp, o, lo, hi, s); });
  });
  if (any_requires_grad({x})) {
    auto node = make_node<DropoutBackward>({x});
    node->keep = keep;
    node->scale = scale;
    set_history(out, node);
  }
  return out;
}

Tensor relu_dropout(const Tensor& x, double p, bool training, Generator& gen) {
  check_p(x, p, "relu_dropout");
  if (!training || p == 0.0) return relu(x);
  const uint64_t base = gen.reserve(uint64_t(x.numel()));
  const double scale = 1.0 / (1.0 - p);
  const Tensor xc = x.contiguous();
  Tensor keep = Tensor::empty(x.shape(), DType::u8);  // becomes keep & (x > 0): the backward's mask
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = xc.data<T>();
    uint8_t* kp = keep.data<uint8_t>();
    T* o = out.data<T>();
    const T s = T(scale);
    masked_pass(keep, p, gen.seed(), base, [&](int64_t lo, int64_t hi) { relu_dropout_chunk(xp, kp, o, lo, hi, s); });
  });
  if (any_requires_grad({x})) {  // dx = dy * keep * (x > 0) / (1 - p)
    auto node = make_node<DropoutBackward>({x});
    node->keep = keep;
    node->scale = scale;
    set_history(out, node);
  }
  return out;
}

Tensor add_dropout(const Tensor& x, const Tensor& y, double p, bool training, Generator& gen) {
  check_p(y, p, "add_dropout");
  check_floating(x, "add_dropout", "x");
  if (!training || p == 0.0) return add(x, y);
  if (x.shape() != y.shape() || x.dtype() != y.dtype()) return add(x, dropout(y, p, training, gen));  // broadcast
  const uint64_t base = gen.reserve(uint64_t(y.numel()));
  const double scale = 1.0 / (1.0 - p);
  const Tensor xc = x.contiguous(), yc = y.contiguous();
  Tensor keep = Tensor::empty(y.shape(), DType::u8);
  Tensor out = Tensor::empty(y.shape(), y.dtype());
  dispatch_float(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = xc.data<T>();
    const T* yp = yc.data<T>();
    const uint8_t* kp = keep.data<uint8_t>();
    T* o = out.data<T>();
    const T s = T(scale);
    masked_pass(keep, p, gen.seed(), base, [&](int64_t lo, int64_t hi) { add_dropout_chunk(xp, yp, kp, o, lo, hi, s); });
  });
  if (any_requires_grad({x, y})) {
    auto node = make_node<AddDropoutBackward>({x, y});
    node->keep = keep;
    node->scale = scale;
    set_history(out, node);
  }
  return out;
}

}  // namespace qkv
