// qkv/models/transformer_blocks.h - the Transformer's layers and stacks (Vaswani et al. 2017, 3.1),
// shared by the encoder-decoder model, encoder-only (BERT) and decoder-only (GPT) models.
//
// Each sublayer (attention or FFN) is wrapped as
//   post-LN (the paper, BERT, Marian):  x = LN(x + Dropout(Sublayer(x)))
//   pre-LN  (GPT-2, most modern models): x = x + Dropout(Sublayer(LN(x)))
// and a pre-LN stack ends with a final LayerNorm ("layer_norm").
// Parameter names follow Hugging Face Marian/BART:
//   layers.{i}.self_attn.{q,k,v,out}_proj, self_attn_layer_norm, encoder_attn.{q,k,v,out}_proj,
//   encoder_attn_layer_norm, fc1, fc2, final_layer_norm.
// torch.nn.TransformerEncoderLayer/DecoderLayer map as norm1 -> self_attn_layer_norm, (decoder)
// norm2 -> encoder_attn_layer_norm, last norm -> final_layer_norm, linear1 -> fc1, linear2 -> fc2.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "qkv/attention/multihead.h"
#include "qkv/nn/layers.h"

namespace qkv::models {

using attention::AttentionPositions;
using attention::KVCache;
using attention::MultiHeadAttention;
using attention::ProjectedKV;

struct BlockOptions {
  int64_t d_model = 512, heads = 8, d_ff = 2048;
  double dropout = 0.1;             // on every sublayer output (the residual branch)
  double attention_dropout = 0.0;   // on the attention weights
  double activation_dropout = 0.0;  // inside the FFN, after the activation
  nn::Activation activation = nn::Activation::relu;
  bool pre_norm = false;
  double eps = 1e-5;  // LayerNorm epsilon
  nn::init::Scheme init = nn::init::Scheme::pytorch_default;
  // Positions inside every self-attention (rotary or relative; never in cross-attention, whose
  // keys are another sequence's positions). Kind::none: the inputs carry positions, or none.
  attention::AttentionPositions self_positions;
};

// Self-attention + FFN. With mask.causal it is also the decoder-only (GPT) block.
class EncoderBlock : public nn::Module {
 public:
  explicit EncoderBlock(const BlockOptions& o);
  // x (B, T, D) -> (B, T, D). weights: if non-null, receives the self-attention weights (B, H, T, T).
  Tensor forward(const Tensor& x, const AttentionMask& mask = {}, Tensor* weights = nullptr) const;

  std::shared_ptr<MultiHeadAttention> self_attn;
  std::shared_ptr<nn::LayerNorm> self_attn_layer_norm, final_layer_norm;
  std::shared_ptr<nn::PositionwiseFFN> ffn;  // its fc1/fc2 are registered here as "fc1"/"fc2"
  std::shared_ptr<nn::Dropout> dropout;
  bool pre_norm;
};

// Incremental-decoding state of one DecoderBlock (not recorded).
struct DecoderLayerCache {
  KVCache self;       // (rows, H, t, Dh) keys/values of the positions decoded so far
  ProjectedKV cross;  // (rows, H, S, Dh) projected memory (undefined without cross-attention)
  void select_rows(const Tensor& index);
};

// Masked self-attention + cross-attention over the memory + FFN. cross_attention = false drops
// the middle sublayer (decoder-only stacks).
class DecoderBlock : public nn::Module {
 public:
  explicit DecoderBlock(const BlockOptions& o, bool cross_attention = true);
  // x (B, T, D), memory (B, S, D) -> (B, T, D). self_mask usually {causal}; memory_mask usually
  // {key_padding = src_pad}. self_w / cross_w receive (B, H, T, T) / (B, H, T, S) if non-null.
  Tensor forward(const Tensor& x, const Tensor& memory, const AttentionMask& self_mask,
                 const AttentionMask& memory_mask, Tensor* self_w = nullptr, Tensor* cross_w = nullptr) const;

  // ---- incremental decoding ----
  // Projects the memory for cross-attention; the cache starts with no target positions.
  DecoderLayerCache start(const Tensor& memory) const;
  // x_new (B, t, D): the next t positions (causal among themselves); appends to cache.self.
  // new_key_padding (B, t) u8 (or undefined): new positions that later positions never attend to.
  Tensor step(const Tensor& x_new, DecoderLayerCache& cache, const AttentionMask& memory_mask,
              const Tensor& new_key_padding = {}) const;

  bool has_cross_attention() const { return encoder_attn != nullptr; }

  std::shared_ptr<MultiHeadAttention> self_attn, encoder_attn;
  std::shared_ptr<nn::LayerNorm> self_attn_layer_norm, encoder_attn_layer_norm, final_layer_norm;
  std::shared_ptr<nn::PositionwiseFFN> ffn;
  std::shared_ptr<nn::Dropout> dropout;
  bool pre_norm;

 private:
  Tensor residual(const Tensor& x, const nn::LayerNorm& ln, const std::function<Tensor(const Tensor&)>& sublayer) const;
};

// An ordered list of child modules named "0", "1", ... (torch.nn.ModuleList).
template <typename M>
class ModuleList : public nn::Module {
 public:
  void push_back(std::shared_ptr<M> m) { items_.push_back(register_module(std::to_string(items_.size()), m)); }
  size_t size() const { return items_.size(); }
  M& operator[](size_t i) const { return *items_.at(i); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::shared_ptr<M>> items_;
};

// N EncoderBlocks (+ final "layer_norm" when pre-LN).
class Encoder : public nn::Module {
 public:
  Encoder(const BlockOptions& o, int64_t num_layers);
  // x (B, S, D) -> (B, S, D). weights: per-layer self-attention weights if non-null.
  Tensor forward(const Tensor& x, const AttentionMask& mask = {}, std::vector<Tensor>* weights = nullptr) const;
  std::shared_ptr<ModuleList<EncoderBlock>> layers;
  std::shared_ptr<nn::LayerNorm> layer_norm;  // null for post-LN
};

// N DecoderBlocks (+ final "layer_norm" when pre-LN).
class Decoder : public nn::Module {
 public:
  Decoder(const BlockOptions& o, int64_t num_layers, bool cross_attention = true);
  // x (B, T, D), memory (B, S, D) -> (B, T, D); self-attention is causal.
  // cross_w: per-layer cross-attention weights (B, H, T, S) if non-null.
  Tensor forward(const Tensor& x, const Tensor& memory, const AttentionMask& memory_mask,
                 std::vector<Tensor>* cross_w = nullptr) const;
  std::vector<DecoderLayerCache> start(const Tensor& memory) const;  // one cache per layer
  // x_new (B, t, D) -> (B, t, D), advancing every layer's cache; new_key_padding as DecoderBlock::step.
  Tensor step(const Tensor& x_new, std::vector<DecoderLayerCache>& caches, const AttentionMask& memory_mask,
              const Tensor& new_key_padding = {}) const;
  std::shared_ptr<ModuleList<DecoderBlock>> layers;
  std::shared_ptr<nn::LayerNorm> layer_norm;  // null for post-LN
};

}  // namespace qkv::models
