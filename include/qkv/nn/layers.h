// qkv/nn/layers.h - the basic layers: Linear, Embedding, LayerNorm, Dropout, PositionwiseFFN.
// Parameter names follow PyTorch / Hugging Face ("weight", "bias", "fc1", "fc2").
#pragma once
#include "qkv/nn/init.h"
#include "qkv/nn/module.h"
#include "qkv/ops/packed.h"

namespace qkv::nn {

class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias = true, init::Scheme scheme = init::Scheme::pytorch_default);
  // (..., in) -> (..., out). Under matmul precision bf16 or int8 in inference
  // (use_cached_low_precision, ops/packed.h) the product runs against the weight converted once
  // (packed()).
  Tensor forward(const Tensor& x) const;
  // The same product against the packed weight (incremental decoding's skinny products; the
  // result may differ from forward's BLAS product in the last bits). Recorded like forward when
  // grad mode is on and x or the weight requires grad.
  Tensor forward_packed(const Tensor& x) const;
  // weight and bias packed (kernels::PackedLinear) for the calling thread's matmul precision on
  // first use and again after they were replaced or written (PackedWeights, ops/packed.h): never
  // older than the parameters.
  std::shared_ptr<const kernels::PackedLinear> packed() const;
  Tensor weight;  // (out, in)
  Tensor bias;    // (out) or undefined

 protected:
  void on_pack_layout(kernels::PackLayout layout, kernels::MatmulPrecision precision) override {
    packed_.set_layout(layout, precision);
  }
  void on_hold_weights(DType as) override {
    hold_in({weight}, as);
    packed_.clear();  // frees the packs of the f32 weight
  }

 private:
  PackedWeights packed_;
};

class Embedding : public Module {
 public:
  // scale: multiply by sqrt(dim), as the Transformer paper does for its embeddings.
  Embedding(int64_t num, int64_t dim, int64_t padding_idx = -1, bool scale = false,
            init::Scheme scheme = init::Scheme::pytorch_default);
  Tensor forward(const Tensor& ids) const;  // i32/i64 (...) -> (..., dim)
  // h (..., dim) @ weight^T -> (..., num): an output head tied to this table (linear(h, weight);
  // under matmul precision bf16 in inference, against the table converted once to bf16).
  Tensor tied_logits(const Tensor& h) const;
  // h (..., dim) @ weight^T -> (..., num): an output head tied to this table, against the packed
  // table (as Linear::forward_packed; never stale). For incremental decoding's logits.
  Tensor tied_logits_packed(const Tensor& h) const;
  Tensor weight;  // (num, dim)
  int64_t padding_idx;
  bool scale;

 protected:
  void on_pack_layout(kernels::PackLayout layout, kernels::MatmulPrecision precision) override {
    packed_.set_layout(layout, precision);
  }
  void on_hold_weights(DType as) override {
    hold_in({weight}, as);
    packed_.clear();  // frees the packs of the f32 weight
  }

 private:
  PackedWeights packed_;
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
  // The same through fc1/fc2's packed weights (Linear::forward_packed): the decoding step.
  Tensor forward_packed(const Tensor& x) const;
  std::shared_ptr<Linear> fc1, fc2;
  std::shared_ptr<Dropout> drop;
  Activation act;

 private:
  Tensor apply(const Tensor& x, bool packed) const;
};

// Applies `scheme` to every Linear and Embedding below `m` (xavier / normal(0, 0.02) / PyTorch).
void initialize(Module& m, init::Scheme scheme, Generator& g = default_generator());

}  // namespace qkv::nn
