#include "qkv/nn/layers.h"

#include <cmath>

#include "qkv/autograd/node.h"
#include "qkv/ops/dropout.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/embedding.h"
#include "qkv/ops/matmul.h"
#include "qkv/ops/norm.h"

namespace qkv::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias, init::Scheme scheme) {
  QKV_CHECK(in > 0 && out > 0, "Linear", "sizes must be positive, got in=", in, " out=", out);
  const bool to_fill = scheme == init::Scheme::none;  // loaded next: no memory until then
  weight = register_parameter("weight", to_fill ? Tensor::zeros_to_fill({out, in}) : Tensor::empty({out, in}));
  if (with_bias) bias = register_parameter("bias", Tensor::zeros({out}));
  switch (scheme) {
    case init::Scheme::none: break;
    case init::Scheme::pytorch_default:
      init::kaiming_uniform_linear(weight);
      if (with_bias) init::uniform(bias, -1.0 / std::sqrt(double(in)), 1.0 / std::sqrt(double(in)));
      break;
    case init::Scheme::xavier_uniform: init::xavier_uniform(weight); break;
    case init::Scheme::normal_002: init::normal(weight, 0.0, 0.02); break;
  }
}

Tensor Linear::forward(const Tensor& x) const {
  if (use_cached_low_precision(x, weight)) return linear_packed(x, *packed());  // bf16 / int8 inference: converted once
  return linear(x, weight, bias);
}

std::shared_ptr<const kernels::PackedLinear> Linear::packed() const {
  return bias.defined() ? packed_.get({weight}, {bias}) : packed_.get({weight});
}

Tensor Linear::forward_packed(const Tensor& x) const {
  if (grad_enabled() && (x.requires_grad() || weight.requires_grad())) return forward(x);  // recorded, not packed
  return linear_packed(x, *packed());
}

Embedding::Embedding(int64_t num, int64_t dim, int64_t padding_idx, bool scale, init::Scheme scheme)
    : padding_idx(padding_idx), scale(scale) {
  QKV_CHECK(num > 0 && dim > 0, "Embedding", "sizes must be positive, got num=", num, " dim=", dim);
  QKV_CHECK(padding_idx < num, "Embedding", "padding_idx ", padding_idx, " out of range for ", num, " entries");
  const bool to_fill = scheme == init::Scheme::none;  // loaded next: no memory until then
  weight = register_parameter("weight", to_fill ? Tensor::zeros_to_fill({num, dim}) : Tensor::empty({num, dim}));
  switch (scheme) {
    case init::Scheme::none: break;
    case init::Scheme::pytorch_default: init::normal(weight, 0.0, 1.0); break;
    case init::Scheme::xavier_uniform: init::xavier_uniform(weight); break;
    case init::Scheme::normal_002: init::normal(weight, 0.0, 0.02); break;
  }
  if (padding_idx >= 0) {
    float* row = weight.data<float>() + padding_idx * dim;
    for (int64_t j = 0; j < dim; ++j) row[j] = 0.f;
    weight.mark_modified();
  }
}

Tensor Embedding::forward(const Tensor& ids) const {
  Tensor e = embedding(ids, weight, padding_idx);  // (..., dim)
  return scale ? mul(e, std::sqrt(double(weight.size(1)))) : e;
}

Tensor Embedding::tied_logits(const Tensor& h) const {
  if (use_cached_low_precision(h, weight)) return linear_packed(h, *packed_.get({weight}));  // bf16 / int8: converted once
  return linear(h, weight);  // (..., num)
}

Tensor Embedding::tied_logits_packed(const Tensor& h) const {
  if (grad_enabled() && (h.requires_grad() || weight.requires_grad())) return linear(h, weight);  // recorded
  return linear_packed(h, *packed_.get({weight}));  // (..., num)
}

LayerNorm::LayerNorm(int64_t dim, double eps, bool affine) : eps(eps) {
  QKV_CHECK(dim > 0, "LayerNorm", "dim must be positive, got ", dim);  // as Linear's and Embedding's
  if (affine) {
    weight = register_parameter("weight", Tensor::ones({dim}));
    bias = register_parameter("bias", Tensor::zeros({dim}));
  }
}

Tensor LayerNorm::forward(const Tensor& x) const { return layer_norm(x, weight, bias, eps); }

Tensor Dropout::forward(const Tensor& x) const { return dropout(x, p, is_training()); }

Activation parse_activation(const std::string& name) {
  if (name == "relu") return Activation::relu;
  if (name == "gelu") return Activation::gelu;
  if (name == "gelu_new" || name == "gelu_tanh" || name == "gelu_pytorch_tanh") return Activation::gelu_tanh;
  if (name == "silu" || name == "swish") return Activation::silu;
  fail("activation", "unknown activation '", name, "' (expected relu, gelu, gelu_new/gelu_tanh, silu/swish)");
}

Tensor activate(const Tensor& x, Activation a) {
  switch (a) {
    case Activation::relu: return relu(x);
    case Activation::gelu: return gelu(x);
    case Activation::gelu_tanh: return gelu(x, GeluApprox::tanh);
    case Activation::silu: return silu(x);
  }
  return x;
}

PositionwiseFFN::PositionwiseFFN(int64_t d_model, int64_t d_ff, Activation act, double dropout, init::Scheme scheme)
    : act(act) {
  fc1 = register_module("fc1", std::make_shared<Linear>(d_model, d_ff, true, scheme));
  fc2 = register_module("fc2", std::make_shared<Linear>(d_ff, d_model, true, scheme));
  drop = register_module("dropout", std::make_shared<Dropout>(dropout));
}

Tensor PositionwiseFFN::forward(const Tensor& x) const { return apply(x, false); }

Tensor PositionwiseFFN::forward_packed(const Tensor& x) const { return apply(x, true); }

Tensor PositionwiseFFN::apply(const Tensor& x, bool packed) const {
  Tensor h = packed ? fc1->forward_packed(x) : fc1->forward(x);  // (..., d_ff)
  // ReLU and dropout in one pass (same mask as drop->forward(relu(h))).
  h = act == Activation::relu ? relu_dropout(h, drop->p, drop->is_training()) : drop->forward(activate(h, act));
  return packed ? fc2->forward_packed(h) : fc2->forward(h);  // (..., d_model)
}

void initialize(Module& m, init::Scheme scheme, Generator& g) {
  if (scheme == init::Scheme::none) return;  // zeros stay zeros
  if (auto* lin = dynamic_cast<Linear*>(&m)) {
    if (scheme == init::Scheme::pytorch_default) {
      init::kaiming_uniform_linear(lin->weight, g);
      if (lin->bias.defined()) {
        double a = 1.0 / std::sqrt(double(lin->weight.size(1)));
        init::uniform(lin->bias, -a, a, g);
      }
    } else {
      if (scheme == init::Scheme::xavier_uniform) init::xavier_uniform(lin->weight, 1.0, g);
      else init::normal(lin->weight, 0.0, 0.02, g);
      if (lin->bias.defined()) lin->bias.zero();
    }
  } else if (auto* emb = dynamic_cast<Embedding*>(&m)) {
    if (scheme == init::Scheme::xavier_uniform) init::xavier_uniform(emb->weight, 1.0, g);
    else init::normal(emb->weight, 0.0, scheme == init::Scheme::normal_002 ? 0.02 : 1.0, g);
    if (emb->padding_idx >= 0) {
      int64_t d = emb->weight.size(1);
      float* row = emb->weight.data<float>() + emb->padding_idx * d;
      for (int64_t j = 0; j < d; ++j) row[j] = 0.f;
      emb->weight.mark_modified();
    }
  }
  for (auto& [name, child] : m.named_children()) initialize(*child, scheme, g);
}

}  // namespace qkv::nn
