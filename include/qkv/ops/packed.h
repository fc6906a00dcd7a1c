// qkv/ops/packed.h - inference-only products against packed weights (kernels::PackedLinear):
// the per-step projections of incremental decoding, and the cache that keeps a packed copy in
// step with the weights it was made from.
#pragma once
#include <array>
#include <memory>
#include <mutex>
#include <vector>

#include "qkv/kernels/gemm.h"
#include "qkv/tensor/tensor.h"

namespace qkv {

// y (..., N) = x (..., K) @ w^T + b for w packed by kernels::pack_linear(w, b) (or
// pack_linear_rows). Under grad mode with x or a weight requiring grad it is linear(x, w.weight,
// w.bias) (recorded; the stacked weights of a rows pack concatenated for it).
Tensor linear_packed(const Tensor& x, const kernels::PackedLinear& w);

// The packed form of one or more weights stacked on axis 0 ([W_0; W_1; ...], (sum N_i, K)) and
// their biases, made on first use and made again whenever a source is stale: another tensor in
// its place, or its values written since (the Storage version, which copy_from, fill, the
// optimizer kernels, nn::init and Tensor::mark_modified bump). The check is a few pointer and
// integer compares, so callers ask for it at every decoding step and never see old weights.
// Thread-safe: get() returns a shared snapshot that stays valid while another thread repacks.
// A copy starts empty (it packs again on first use).
// One packed form per matmul precision: fp32, (bf16) the weight converted once to bf16, or (int8)
// quantized once per output channel; under int8 a stack too small to pay (kernels::int8_pays)
// gets the fp32 form instead, unless it pays from a batch (kernels::int8_pays_from_rows: then
// its int8 form holds fp32 panels too, used below that batch). get() returns the form for
// `precision` (by default the calling thread's, kernels::matmul_precision()); a stale source
// drops every form, so none is ever older than the weights.
// The layout of each form (kernels::PackLayout) is the owner's choice, one for each: panels (a
// copy, the default; bf16 and int8 in oneDNN's layout) or rows (fp32: the f32 weights read in
// place, no copy; bf16: the rows converted once to bf16; int8: quantized once into s8 rows, for
// qkv's own batch-1 kernel; taken only when every weight is f32, or held in bf16 for bf16, and
// contiguous, else panels). set_layout drops a form made in the other layout.
class PackedWeights {
 public:
  PackedWeights() = default;
  PackedWeights(const PackedWeights& other) : layout_(other.layouts()) {}
  PackedWeights& operator=(const PackedWeights&);

  void set_layout(kernels::PackLayout layout);  // of every form
  // Drops every form and the sources it holds (their storage too): nn::Module::hold_weights_in_bf16
  // frees the f32 weights this way. The next get() packs again.
  void clear();
  // Of one form (a stack too small for int8 takes the fp32 form, in the fp32 form's layout).
  void set_layout(kernels::PackLayout layout, kernels::MatmulPrecision precision);
  kernels::PackLayout layout(kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32) const;

  // weights: (N_i, K) each; biases: one (N_i) per weight, or empty (no bias).
  std::shared_ptr<const kernels::PackedLinear> get(const std::vector<Tensor>& weights,
                                                   const std::vector<Tensor>& biases = {}) const {
    return get(weights, biases, kernels::matmul_precision());
  }
  std::shared_ptr<const kernels::PackedLinear> get(const std::vector<Tensor>& weights,
                                                   const std::vector<Tensor>& biases,
                                                   kernels::MatmulPrecision precision) const;

 private:
  struct Source {  // what a tensor was when it was packed (holding it: no address is reused)
    std::shared_ptr<TensorImpl> impl;
    std::shared_ptr<Storage> storage;
    int64_t offset = 0;
    Shape shape, strides;
    uint64_t version = 0;
    bool same_as(const Tensor& t) const;
  };
  static Source source_of(const Tensor& t);
  using Layouts = std::array<kernels::PackLayout, 3>;  // of the fp32, bf16 and int8 forms
  Layouts layouts() const;
  mutable std::mutex mutex_;
  mutable std::vector<Source> sources_;  // weights then biases
  mutable std::shared_ptr<const kernels::PackedLinear> packed_[3];  // by MatmulPrecision: fp32, bf16, int8
  Layouts layout_{kernels::PackLayout::panels, kernels::PackLayout::panels, kernels::PackLayout::panels};
};

// True when a product of x against the weight w should take the weight's cached bf16 or int8
// form (PackedWeights, linear_packed) rather than a GEMM that converts w on every call (bf16) or
// an fp32 one (int8): the calling thread's matmul precision is not fp32, x is f32, and the
// product is not recorded for backward (inference). Layers that own their weights (nn::Linear,
// nn::Embedding's tied head, MultiHeadAttention's fused projections) ask this in their ordinary
// forward. A weight held in bf16 (nn::Module::hold_weights_in_bf16) has no other product: for it
// this is true, or an error naming what is wrong (precision not bf16, x not f32, x recorded).
bool use_cached_low_precision(const Tensor& x, const Tensor& w);

}  // namespace qkv
