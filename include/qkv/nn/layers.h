// qkv/nn/layers.h - the basic layers: Linear, Embedding, LayerNorm, Dropout, PositionwiseFFN.
// Parameter names follow PyTorch / Hugging Face ("weight", "bias", "fc1", "fc2").
#pragma once
#include "qkv/nn/init.h"
#include "qkv/nn/module.h"

namespace qkv::nn {

class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias = true, init::Scheme scheme = init::Scheme::pytorch_default);
  Tensor forward(const Tensor& x) const;  // (..., in) -> (..., out)
  Tensor weight;  // (out, in)
  Tensor bias;    // (out) or undefined
};

class Embedding : public Module {
 public:
  // scale: multiply by sqrt(dim), as the Transformer paper does for its embeddings.
  Embedding(int64_t num, int64_t dim, int64_t padding_idx = -1, bool scale = false,
            init::Scheme scheme = init::Scheme::pytorch_default);
  Tensor forward(const Tensor& ids) const;  // i32/i64 (...) -> (..., dim)
  Tensor weight;  // (num, dim)
  int64_t padding_idx;
  bool scale;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) const;  // normalises the last axis
  Tensor weight, bias;  // (dim) each, undefined without affine
  double eps;
};

class Dropout : public Module {
 public:
  explicit Dropout(double p) : p(p) {}
  Tensor forward(const Tensor& x) const;  // identity in eval mode or when p == 0
  double p;
};

enum class Activation { relu, gelu, gelu_tanh, silu };
Activation parse_activation(const std::string& name);  // "relu", "gelu", "gelu_new"/"gelu_tanh", "silu"/"swish"
Tensor activate(const Tensor& x, Activation a);

// FFN(x) = fc2(Dropout(act(fc1(x)))): d_model -> d_ff -> d_model.
class PositionwiseFFN : public Module {
 public:
  PositionwiseFFN(int64_t d_model, int64_t d_ff, Activation act, double dropout,
                  init::Scheme scheme = init::Scheme::pytorch_default);
  Tensor forward(const Tensor& x) const;
  std::shared_ptr<Linear> fc1, fc2;
  std::shared_ptr<Dropout> drop;
  Activation act;
};

// Applies `scheme` to every Linear and Embedding below `m` (xavier / normal(0, 0.02) / PyTorch).
void initialize(Module& m, init::Scheme scheme, Generator& g = default_generator());

}  // namespace qkv::nn
