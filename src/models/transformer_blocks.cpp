#include "qkv/models/transformer_blocks.h"

#include "qkv/ops/dropout.h"
#include "qkv/ops/elementwise.h"

namespace qkv::models {

namespace {

void check_options(const BlockOptions& o, const char* who) {
  QKV_CHECK(o.d_model > 0 && o.heads > 0 && o.d_model % o.heads == 0, who,
            "d_model must be a positive multiple of heads, got d_model=", o.d_model, " heads=", o.heads);
  QKV_CHECK(o.d_ff > 0, who, "d_ff must be positive, got ", o.d_ff);
  for (double p : {o.dropout, o.attention_dropout, o.activation_dropout})
    QKV_CHECK(p >= 0.0 && p < 1.0, who, "dropout probabilities must be in [0, 1), got ", p);
}

std::shared_ptr<MultiHeadAttention> make_attention(const BlockOptions& o) {
  return std::make_shared<MultiHeadAttention>(o.d_model, o.heads, o.attention_dropout, true, -1, -1, o.init);
}

// The self-attention of a block: positions (rotary / relative) apply here only.
std::shared_ptr<MultiHeadAttention> make_self_attention(const BlockOptions& o) {
  auto a = make_attention(o);
  if (o.self_positions.kind != AttentionPositions::Kind::none) a->set_positions(o.self_positions);
  return a;
}

std::shared_ptr<nn::PositionwiseFFN> make_ffn(const BlockOptions& o) {
  return std::make_shared<nn::PositionwiseFFN>(o.d_model, o.d_ff, o.activation, o.activation_dropout, o.init);
}

// One residual sublayer in either norm placement.
Tensor sublayer_connection(const Tensor& x, const nn::LayerNorm& ln, const nn::Dropout& drop, bool pre_norm,
                           const std::function<Tensor(const Tensor&)>& f) {
  // add_dropout(x, y) = x + Dropout(y) in one pass (ops/dropout.h)
  if (pre_norm) return add_dropout(x, f(ln.forward(x)), drop.p, drop.is_training());  // x + Dropout(f(LN(x)))
  return ln.forward(add_dropout(x, f(x), drop.p, drop.is_training()));                // LN(x + Dropout(f(x)))
}

}  // namespace

// ---------------------------------------------------------------- EncoderBlock

EncoderBlock::EncoderBlock(const BlockOptions& o) : pre_norm(o.pre_norm) {
  check_options(o, "EncoderBlock");
  self_attn = register_module("self_attn", make_self_attention(o));
  self_attn_layer_norm = register_module("self_attn_layer_norm", std::make_shared<nn::LayerNorm>(o.d_model, o.eps));
  ffn = register_flattened(make_ffn(o), {{"dropout", "activation_dropout"}});  // Marian/BART: fc1, fc2 in the layer
  final_layer_norm = register_module("final_layer_norm", std::make_shared<nn::LayerNorm>(o.d_model, o.eps));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(o.dropout));
}

Tensor EncoderBlock::forward(const Tensor& x, const AttentionMask& mask, Tensor* weights) const {
  Tensor h = sublayer_connection(x, *self_attn_layer_norm, *dropout, pre_norm, [&](const Tensor& y) {
    auto r = self_attn->forward(y, y, y, mask, weights != nullptr);
    if (weights) *weights = r.weights;
    return r.out;
  });
  return sublayer_connection(h, *final_layer_norm, *dropout, pre_norm, [&](const Tensor& y) { return ffn->forward(y); });
}

// ---------------------------------------------------------------- DecoderBlock

void DecoderLayerCache::select_rows(const Tensor& index) {
  self.select_rows(index);
  if (cross.k.defined()) cross.select_rows(index);
}

DecoderBlock::DecoderBlock(const BlockOptions& o, bool cross_attention) : pre_norm(o.pre_norm) {
  check_options(o, "DecoderBlock");
  self_attn = register_module("self_attn", make_self_attention(o));
  self_attn_layer_norm = register_module("self_attn_layer_norm", std::make_shared<nn::LayerNorm>(o.d_model, o.eps));
  if (cross_attention) {
    encoder_attn = register_module("encoder_attn", make_attention(o));
    encoder_attn_layer_norm =
        register_module("encoder_attn_layer_norm", std::make_shared<nn::LayerNorm>(o.d_model, o.eps));
  }
  ffn = register_flattened(make_ffn(o), {{"dropout", "activation_dropout"}});  // Marian/BART: fc1, fc2 in the layer
  final_layer_norm = register_module("final_layer_norm", std::make_shared<nn::LayerNorm>(o.d_model, o.eps));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(o.dropout));
}

Tensor DecoderBlock::residual(const Tensor& x, const nn::LayerNorm& ln,
                              const std::function<Tensor(const Tensor&)>& sublayer) const {
  return sublayer_connection(x, ln, *dropout, pre_norm, sublayer);
}

Tensor DecoderBlock::forward(const Tensor& x, const Tensor& memory, const AttentionMask& self_mask,
                             const AttentionMask& memory_mask, Tensor* self_w, Tensor* cross_w) const {
  Tensor h = residual(x, *self_attn_layer_norm, [&](const Tensor& y) {
    auto r = self_attn->forward(y, y, y, self_mask, self_w != nullptr);
    if (self_w) *self_w = r.weights;
    return r.out;
  });
  if (encoder_attn) {
    QKV_CHECK(memory.defined(), "DecoderBlock", "a block with cross-attention needs the encoder memory");
    h = residual(h, *encoder_attn_layer_norm, [&](const Tensor& y) {
      auto r = encoder_attn->forward(y, memory, memory, memory_mask, cross_w != nullptr);
      if (cross_w) *cross_w = r.weights;
      return r.out;
    });
  }
  return residual(h, *final_layer_norm, [&](const Tensor& y) { return ffn->forward(y); });
}

DecoderLayerCache DecoderBlock::start(const Tensor& memory) const {
  DecoderLayerCache c;
  if (encoder_attn) {
    QKV_CHECK(memory.defined(), "DecoderBlock::start", "a block with cross-attention needs the encoder memory");
    c.cross = encoder_attn->project_kv(memory, memory);
  }
  return c;
}

Tensor DecoderBlock::step(const Tensor& x_new, DecoderLayerCache& cache, const AttentionMask& memory_mask,
                          const Tensor& new_key_padding) const {
  Tensor h = residual(x_new, *self_attn_layer_norm,
                      [&](const Tensor& y) { return self_attn->step(y, cache.self, new_key_padding).out; });
  if (encoder_attn)
    h = residual(h, *encoder_attn_layer_norm,
                 [&](const Tensor& y) { return encoder_attn->attend(y, cache.cross, memory_mask).out; });
  return residual(h, *final_layer_norm, [&](const Tensor& y) { return ffn->forward_packed(y); });
}

// ---------------------------------------------------------------- stacks

Encoder::Encoder(const BlockOptions& o, int64_t num_layers) {
  QKV_CHECK(num_layers >= 0, "Encoder", "num_layers must be >= 0, got ", num_layers);
  layers = register_module("layers", std::make_shared<ModuleList<EncoderBlock>>());
  for (int64_t i = 0; i < num_layers; ++i) layers->push_back(std::make_shared<EncoderBlock>(o));
  if (o.pre_norm) layer_norm = register_module("layer_norm", std::make_shared<nn::LayerNorm>(o.d_model, o.eps));
}

Tensor Encoder::forward(const Tensor& x, const AttentionMask& mask, std::vector<Tensor>* weights) const {
  Tensor h = x;  // (B, S, D)
  if (weights) weights->clear();
  for (auto& layer : *layers) {
    Tensor w;
    h = layer->forward(h, mask, weights ? &w : nullptr);
    if (weights) weights->push_back(w);
  }
  return layer_norm ? layer_norm->forward(h) : h;
}

Decoder::Decoder(const BlockOptions& o, int64_t num_layers, bool cross_attention) {
  QKV_CHECK(num_layers >= 0, "Decoder", "num_layers must be >= 0, got ", num_layers);
  layers = register_module("layers", std::make_shared<ModuleList<DecoderBlock>>());
  for (int64_t i = 0; i < num_layers; ++i) layers->push_back(std::make_shared<DecoderBlock>(o, cross_attention));
  if (o.pre_norm) layer_norm = register_module("layer_norm", std::make_shared<nn::LayerNorm>(o.d_model, o.eps));
}

Tensor Decoder::forward(const Tensor& x, const Tensor& memory, const AttentionMask& memory_mask,
                        std::vector<Tensor>* cross_w) const {
  AttentionMask causal;
  causal.causal = true;
  Tensor h = x;  // (B, T, D)
  if (cross_w) cross_w->clear();
  for (auto& layer : *layers) {
    Tensor w;
    h = layer->forward(h, memory, causal, memory_mask, nullptr, cross_w ? &w : nullptr);
    if (cross_w) cross_w->push_back(w);
  }
  return layer_norm ? layer_norm->forward(h) : h;
}

std::vector<DecoderLayerCache> Decoder::start(const Tensor& memory) const {
  std::vector<DecoderLayerCache> caches;
  for (auto& layer : *layers) caches.push_back(layer->start(memory));
  return caches;
}

Tensor Decoder::step(const Tensor& x_new, std::vector<DecoderLayerCache>& caches, const AttentionMask& memory_mask,
                     const Tensor& new_key_padding) const {
  QKV_CHECK(caches.size() == layers->size(), "Decoder::step", "expected ", layers->size(), " layer caches, got ",
            caches.size());
  Tensor h = x_new;  // (B, t, D)
  for (size_t i = 0; i < layers->size(); ++i) h = (*layers)[i].step(h, caches[i], memory_mask, new_key_padding);
  return layer_norm ? layer_norm->forward(h) : h;
}

}  // namespace qkv::models
