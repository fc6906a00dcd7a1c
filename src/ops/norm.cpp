#include "qkv/ops/norm.h"

#include "qkv/autograd/node.h"
#include "qkv/kernels/norm.h"

namespace qkv {
namespace {

struct LayerNormBackward : Node {
  Tensor x, w, mean, rstd;  // x (rows, C) contiguous; w (C) or undefined; mean, rstd (rows)
  const char* name() const override { return "LayerNormBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    // y = (x - mean) * rstd * w + b
    Tensor gx = Tensor::empty(x.shape(), x.dtype());
    Tensor gw, gb;
    if (next[1].valid()) gw = Tensor::empty(input_shapes[1], x.dtype());
    if (next[2].valid()) gb = Tensor::empty(input_shapes[2], x.dtype());
    kernels::layer_norm_backward(x, w, mean, rstd, g[0].contiguous(), gx, gw.defined() ? &gw : nullptr,
                                 gb.defined() ? &gb : nullptr);
    return {next[0].valid() ? gx : Tensor(), gw, gb};
  }
  void release_saved() override { x = w = mean = rstd = Tensor(); }
};

void check_param(const Tensor& p, const Tensor& x, const char* arg) {
  if (!p.defined()) return;
  QKV_CHECK(p.dtype() == x.dtype(), "layer_norm", arg, " must be ", dtype_name(x.dtype()), " like x, got ",
            p.str());
  QKV_CHECK(p.ndim() == 1 && p.shape()[0] == x.shape().back(), "layer_norm", arg, " must have shape (",
            x.shape().back(), ") for x ", x.str(), ", got ", p.str());
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_floating(x, "layer_norm", "x");
  QKV_CHECK(x.ndim() >= 1 && x.shape().back() > 0, "layer_norm", "x needs a non-empty last axis, got ", x.str());
  QKV_CHECK(eps >= 0, "layer_norm", "eps must be >= 0, got ", eps);
  check_param(weight, x, "weight");
  check_param(bias, x, "bias");
  Tensor xc = x.contiguous();
  Tensor wc = weight.defined() ? weight.contiguous() : Tensor();
  Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
  int64_t rows = x.numel() / x.shape().back();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor mean = Tensor::empty({rows}, x.dtype()), rstd = Tensor::empty({rows}, x.dtype());
  kernels::layer_norm_forward(xc, wc, bc, eps, y, mean, rstd);
  if (any_requires_grad({x, weight, bias})) {
    auto node = make_node<LayerNormBackward>({x, weight, bias});
    node->x = node->save(xc);
    node->w = node->save(wc);
    node->mean = mean;
    node->rstd = rstd;
    set_history(y, node);
  }
  return y;
}

}  // namespace qkv
