#include "qkv/models/transformer.h"

#include "qkv/autograd/node.h"
#include "qkv/nn/init.h"
#include "qkv/ops/matmul.h"
#include "qkv/ops/shape.h"

namespace qkv::models {

void OutputProjection::tie(const Tensor& w) {
  QKV_CHECK(w.shape() == weight.shape(), "OutputProjection::tie", "expected a ", weight.shape().str(),
            " weight, got ", w.str());
  tie_parameter("weight", w);
  weight = w;
}

// ---------------------------------------------------------------- state

void TransformerState::select_rows(const std::vector<int64_t>& rows) {
  for (int64_t r : rows)
    QKV_CHECK(r >= 0 && r < rows_, "TransformerState::select_rows", "row ", r, " out of range for ", rows_, " rows");
  NoGradGuard ng;
  Tensor index = Tensor::from_vector<int64_t>(rows, {int64_t(rows.size())});
  for (auto& c : layers) c.select_rows(index);
  if (src_pad.defined()) src_pad = index_select(src_pad, 0, index);
  rows_ = int64_t(rows.size());
}

// ---------------------------------------------------------------- model

Transformer::Transformer(const TransformerConfig& cfg, Generator& gen, nn::init::Scheme init) : cfg_(cfg) {
  cfg_.validate();
  QKV_CHECK(init == nn::init::Scheme::xavier_uniform || init == nn::init::Scheme::none, "Transformer",
            "init must be xavier_uniform or none (a model to be loaded)");
  const bool draw = init != nn::init::Scheme::none;
  const auto built = draw ? nn::init::Scheme::pytorch_default : nn::init::Scheme::none;  // redrawn below if draw
  const int64_t D = cfg_.d_model;
  src_embed = register_module("src_embed", std::make_shared<nn::Embedding>(cfg_.src_vocab, D, cfg_.pad_id,
                                                                           cfg_.scale_embeddings, built));
  tgt_embed = cfg_.shared_embeddings ? src_embed
                                     : std::make_shared<nn::Embedding>(cfg_.tgt_vocab, D, cfg_.pad_id,
                                                                       cfg_.scale_embeddings, built);
  register_module("tgt_embed", tgt_embed);
  if (cfg_.positional == PositionalKind::sinusoidal) {
    sinusoid = register_module("sinusoid", std::make_shared<nn::SinusoidalPositionalEncoding>(D, cfg_.max_len));
  } else if (cfg_.positional == PositionalKind::learned) {
    src_pos = register_module("src_pos", std::make_shared<nn::LearnedPositionalEmbedding>(cfg_.max_len, D));
    tgt_pos = register_module("tgt_pos", std::make_shared<nn::LearnedPositionalEmbedding>(cfg_.max_len, D));
  }
  BlockOptions o = cfg_.block_options();
  if (!draw) o.init = nn::init::Scheme::none;
  encoder = register_module("encoder", std::make_shared<Encoder>(o, cfg_.enc_layers));
  decoder = register_module("decoder", std::make_shared<Decoder>(o, cfg_.dec_layers));
  generator = register_module("generator", std::make_shared<OutputProjection>(D, cfg_.tgt_vocab, built));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(cfg_.dropout));
  if (!draw) {  // to be loaded: no matrix drawn (learned position tables were)
    if (cfg_.tie_output) generator->tie(tgt_embed->weight);
    return;
  }

  nn::initialize(*this, nn::init::Scheme::xavier_uniform, gen);
  if (src_pos) {  // learned positions: N(0, 0.02) like GPT/BERT position tables
    nn::init::normal(src_pos->weight, 0.0, 0.02, gen);
    nn::init::normal(tgt_pos->weight, 0.0, 0.02, gen);
  }
  if (cfg_.positional == PositionalKind::relative) {  // Shaw's tables: Xavier like the other matrices
    for (auto& [name, p] : named_parameters())
      if (name.find(".relative_") != std::string::npos) {
        Tensor t = p;  // a handle on the parameter
        nn::init::xavier_uniform(t, 1.0, gen);
      }
  }
  if (cfg_.tie_output) generator->tie(tgt_embed->weight);  // after the draws: their sequence is fixed
}

Tensor Transformer::check_ids(const Tensor& ids, int64_t vocab, const char* what) const {
  QKV_CHECK(ids.defined() && ids.ndim() == 2 && (ids.dtype() == DType::i64 || ids.dtype() == DType::i32),
            "Transformer", what, " must be (B, T) i64, got ", ids.defined() ? ids.str() : std::string("undefined"));
  QKV_CHECK(ids.size(1) >= 1 && ids.size(1) <= cfg_.max_len, "Transformer", what, " length ", ids.size(1),
            " outside [1, max_len=", cfg_.max_len, "]");
  return ids;
}

void Transformer::hold_weights_in_int8_blocked() {
  hold_weights_in_int8();
  set_pack_layout(kernels::PackLayout::panels, kernels::MatmulPrecision::int8);
}

AttentionMask Transformer::memory_mask(const Tensor& src_pad) const {
  AttentionMask m;
  m.key_padding = src_pad;
  return m;
}

Tensor Transformer::embed_source(const Tensor& src) const {
  Tensor x = src_embed->forward(src);  // (B, S, D), * sqrt(D) if scale_embeddings
  if (sinusoid) x = sinusoid->forward(x);
  if (src_pos) x = src_pos->forward(x);  // relative / rope / none: positions inside self-attention
  return dropout->forward(x);
}

Tensor Transformer::embed_target(const Tensor& tgt, int64_t offset) const {
  Tensor x = tgt_embed->forward(tgt);  // (B, T, D)
  if (sinusoid) x = sinusoid->forward(x, offset);
  if (tgt_pos) x = tgt_pos->forward(x, offset);
  return dropout->forward(x);
}

Tensor Transformer::encode(const Tensor& src, const Tensor& src_pad) const {
  check_ids(src, cfg_.src_vocab, "src");
  if (src_pad.defined())
    QKV_CHECK(src_pad.shape() == src.shape() && (src_pad.dtype() == DType::u8 || src_pad.dtype() == DType::boolean),
              "Transformer", "src_pad must be u8 ", src.shape().str(), " like src, got ", src_pad.str());
  return encoder->forward(embed_source(src), memory_mask(src_pad));  // (B, S, D)
}

Tensor Transformer::decode(const Tensor& tgt_in, const Tensor& memory, const Tensor& src_pad,
                           std::vector<Tensor>* cross_w) const {
  check_ids(tgt_in, cfg_.tgt_vocab, "tgt_in");
  QKV_CHECK(memory.size(0) == tgt_in.size(0), "Transformer", "batch of tgt_in ", tgt_in.str(),
            " differs from the memory's ", memory.str());
  return decoder->forward(embed_target(tgt_in), memory, memory_mask(src_pad), cross_w);  // (B, T, D)
}

Tensor Transformer::forward(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in) {
  Tensor memory = encode(src, src_pad);                   // (B, S, D)
  return generator->forward(decode(tgt_in, memory, src_pad));  // (B, T, V)
}

Tensor Transformer::loss(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in, const Tensor& tgt_out,
                         int64_t pad_id, double label_smoothing, Reduction reduction) {
  Tensor memory = encode(src, src_pad);  // (B, S, D)
  return linear_cross_entropy(decode(tgt_in, memory, src_pad), generator->weight, generator->bias, tgt_out, pad_id,
                              label_smoothing, reduction);
}

std::unique_ptr<DecoderState> Transformer::start(const Tensor& src, const Tensor& src_pad) {
  NoGradGuard ng;
  Tensor memory = encode(src, src_pad);  // (B, S, D)
  auto st = std::make_unique<TransformerState>();
  st->layers = decoder->start(memory);
  st->src_pad = src_pad;
  st->rows_ = src.size(0);
  return st;
}

Tensor Transformer::step(DecoderState& state, const Tensor& last_tokens) {
  auto* st = dynamic_cast<TransformerState*>(&state);
  QKV_CHECK(st != nullptr, "Transformer::step", "the state was not made by Transformer::start");
  NoGradGuard ng;
  const int64_t R = st->rows();
  QKV_CHECK(last_tokens.defined() && last_tokens.numel() == R && (last_tokens.ndim() == 1 || last_tokens.ndim() == 2),
            "Transformer::step", "expected last_tokens (", R, ") or (", R, ", 1), got ",
            last_tokens.defined() ? last_tokens.str() : std::string("undefined"));
  QKV_CHECK(st->steps_ < cfg_.max_len, "Transformer::step", "target length would exceed max_len ", cfg_.max_len);
  Tensor tok = reshape(last_tokens, {R, 1});
  Tensor x = embed_target(tok, st->steps_);                                  // (R, 1, D)
  Tensor h = decoder->step(x, st->layers, memory_mask(st->src_pad));          // (R, 1, D)
  ++st->steps_;
  return reshape(generator->forward_packed(h), {R, cfg_.tgt_vocab});       // (R, V)
}

AttentionMaps Transformer::cross_attention(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in) {
  NoGradGuard ng;
  const nn::EvalScope eval_mode(*this);
  AttentionMaps maps;
  decode(tgt_in, encode(src, src_pad), src_pad, &maps.layers);
  return maps;
}

}  // namespace qkv::models
