#include "qkv/ops/dropout.h"

#include "qkv/autograd/node.h"
#include "qkv/kernels/elementwise.h"

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
    const T* xp = x.data<T>();
    const uint8_t* kp = keep.data<uint8_t>();
    T* o = out.data<T>();
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

}  // namespace

Tensor dropout_keep_mask(const Shape& shape, double p, uint64_t seed, uint64_t base) {
  Tensor keep = Tensor::empty(shape, DType::u8);
  uint8_t* kp = keep.data<uint8_t>();
  int64_t n = shape.numel(), blocks = (n + 3) / 4;
  float pf = float(p);
#pragma omp parallel for schedule(static) if (n >= kernels::kParallelGrain)
  for (int64_t b = 0; b < blocks; ++b) {
    auto r = philox4x32(seed, 0, base + uint64_t(b));
    for (int64_t j = 0; j < 4 && b * 4 + j < n; ++j) kp[b * 4 + j] = u32_to_unit_float(r[size_t(j)]) >= pf;
  }
  return keep;
}

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  check_floating(x, "dropout", "x");
  QKV_CHECK(p >= 0.0 && p < 1.0, "dropout", "p must be in [0, 1), got ", p);
  if (!training || p == 0.0) return x;
  uint64_t base = gen.reserve(uint64_t(x.numel()));
  Tensor keep = dropout_keep_mask(x.shape(), p, gen.seed(), base);
  double scale = 1.0 / (1.0 - p);
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  apply_mask(x.contiguous(), keep, scale, out);
  if (any_requires_grad({x})) {
    auto node = make_node<DropoutBackward>({x});
    node->keep = keep;
    node->scale = scale;
    set_history(out, node);
  }
  return out;
}

}  // namespace qkv
