#include "qkv/ops/dropout.h"

#include <algorithm>

#include "qkv/autograd/node.h"
#include "qkv/kernels/dropout.h"
#include "qkv/ops/elementwise.h"

namespace qkv {
namespace {

struct DropoutBackward : Node {  // y = x * keep / (1 - p)
  Tensor keep;                   // u8, x's shape
  double scale = 1;
  const char* name() const override { return "DropoutBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    Tensor gx = Tensor::empty(keep.shape(), g[0].dtype());
    kernels::apply_keep_mask(g[0].contiguous(), keep, scale, gx);
    return {gx};
  }
  void release_saved() override { keep = Tensor(); }
};

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
      kernels::apply_keep_mask(g[0].contiguous(), keep, scale, gy);
    }
    return {next[0].valid() ? g[0] : Tensor(), gy};
  }
  void release_saved() override { keep = Tensor(); }
};

}  // namespace

Tensor dropout_keep_mask(const Shape& shape, double p, uint64_t seed, uint64_t base) {
  Tensor keep = Tensor::empty(shape, DType::u8);
  kernels::dropout_keep_mask(keep, p, seed, base);
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
  kernels::dropout_forward(xc, p, gen.seed(), base, keep, out);
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
  Tensor keep = Tensor::empty(x.shape(), DType::u8);  // becomes keep & !(x <= 0): the backward's mask
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  kernels::relu_dropout_forward(xc, p, gen.seed(), base, keep, out);
  if (any_requires_grad({x})) {  // dx = dy * keep * !(x <= 0) / (1 - p)
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
  kernels::add_dropout_forward(xc, yc, p, gen.seed(), base, keep, out);
  if (any_requires_grad({x, y})) {
    auto node = make_node<AddDropoutBackward>({x, y});
    node->keep = keep;
    node->scale = scale;
    set_history(out, node);
  }
  return out;
}

}  // namespace qkv
