// qkv/models/transformer.h - the encoder-decoder Transformer (Vaswani et al. 2017) as a Seq2Seq.
//
//   memory = Encoder(Dropout(E_src[src] * sqrt(d) + PE))                       (B, S, D)
//   logits = Generator(Decoder(Dropout(E_tgt[tgt_in] * sqrt(d) + PE), memory))  (B, T, V)
//
// Positions ("positional"):
//   sinusoidal  PE added to the embeddings (the paper; interleaved sin/cos)
//   learned     a learned table per side added to the embeddings (src_pos, tgt_pos)
//   relative    no PE; every encoder and decoder self-attention adds Shaw et al. (2018)'s learned
//               key and value vectors of the clipped distance clip(j - i, -k, k), k = relative_clip:
//                 e_ij = q_i . (k_j + aK_ij) / sqrt(Dh),  z_i = sum_j a_ij (v_j + aV_ij)
//               As Shaw et al.: one table per layer (of each self-attention), shared by its heads,
//               for keys and values, and none in cross-attention.
//   rope        no PE; every encoder and decoder self-attention rotates q and k at their absolute
//               positions (Su et al. 2021, RoFormer), base rope_base, pairs as rope_style
//               ("interleaved" (2c, 2c+1) as the paper, or "half" (c, c + Dh/2) as GPT-NeoX/LLaMA)
//   none        no position information (a bag of words; for ablations)
// Cross-attention never gets positions (its keys are the source's; the standard choice for both
// relative and rotary encoder-decoders). Incremental decoding keeps them exact: RoPE keys are
// rotated at their positions before they are cached; relative queries sit at the cache length.
//
// Parameter names: src_embed.weight, tgt_embed.weight (the same tensor when shared: saved once,
// as src_embed.weight), src_pos.weight / tgt_pos.weight (learned positions only),
// encoder.layers.{i}.*, decoder.layers.{i}.* (see transformer_blocks.h), encoder.layer_norm /
// decoder.layer_norm (pre-LN only), generator.weight (omitted when tied to tgt_embed), generator.bias.
// Relative positions add {encoder,decoder}.layers.{i}.self_attn.relative_key and .relative_value,
// each (2 relative_clip + 1, d_model / heads), row r for distance r - relative_clip.
// Sinusoidal, rotary and no positions have no parameters: models without relative positions have
// exactly the parameters they had before these options existed.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "qkv/models/seq2seq.h"
#include "qkv/models/transformer_blocks.h"
#include "qkv/nn/positional.h"

namespace qkv::models {

enum class PositionalKind { sinusoidal, learned, relative, rope, none };

struct TransformerConfig {
  int64_t src_vocab = 0, tgt_vocab = 0;
  int64_t d_model = 512, heads = 8, enc_layers = 6, dec_layers = 6, d_ff = 2048;
  double dropout = 0.1;            // embeddings, every sublayer output, inside the FFN
  double attention_dropout = 0.0;  // on attention weights
  std::string activation = "relu";  // relu | gelu | gelu_tanh | silu (nn::parse_activation)
  bool pre_norm = false;            // pre-LN blocks + final LayerNorms; post-LN (the paper) otherwise
  bool shared_embeddings = false;   // one table for source and target (needs src_vocab == tgt_vocab)
  bool tie_output = false;          // generator.weight is tgt_embed.weight
  int64_t max_len = 512;            // longest source / target sequence
  int64_t pad_id = 0, bos_id = 1, eos_id = 2;
  PositionalKind positional = PositionalKind::sinusoidal;  // sinusoidal: interleaved sin/cos (the paper)
  int64_t relative_clip = 16;        // relative: Shaw's k, distances beyond +-k share one vector
  double rope_base = 10000.0;        // rope: theta_c = base^(-2c / Dh)
  std::string rope_style = "interleaved";  // rope: "interleaved" (RoFormer) | "half" (GPT-NeoX)
  bool scale_embeddings = true;     // multiply embeddings by sqrt(d_model)

  void validate() const;  // throws qkv::Error naming the field
  BlockOptions block_options() const;
};

// JSON with every field above ("positional": "sinusoidal" | "learned" | "relative" | "rope" | "none";
// relative_clip is written only for relative positions, rope_base and rope_style only for rope). from_json starts from the
// defaults, rejects unknown keys and wrong types (qkv::Error naming the key) and validates.
void to_json(nlohmann::json& j, const TransformerConfig& c);
void from_json(const nlohmann::json& j, TransformerConfig& c);

// Decoding state: per-layer self-attention caches and projected encoder K/V.
class TransformerState : public DecoderState {
 public:
  void select_rows(const std::vector<int64_t>& rows) override;
  int64_t rows() const override { return src_pad.defined() ? src_pad.size(0) : rows_; }
  int64_t steps() const override { return steps_; }

  std::vector<DecoderLayerCache> layers;
  Tensor src_pad;  // (rows, S) u8, or undefined (no padding)
  int64_t rows_ = 0, steps_ = 0;
};

// The output projection; tie() makes its weight another parameter (the target embedding).
class OutputProjection : public nn::Linear {
 public:
  OutputProjection(int64_t d_model, int64_t vocab, nn::init::Scheme init = nn::init::Scheme::pytorch_default)
      : nn::Linear(d_model, vocab, true, init) {}
  void tie(const Tensor& w);  // w (vocab, d_model)
};

class Transformer : public Seq2Seq {
 public:
  // Initialises like the paper's reference / the Annotated Transformer: Xavier-uniform matrices
  // and embeddings (padding row zero), zero biases, LayerNorm (1, 0). init none: a model to be
  // loaded, its matrices zeros on untouched pages (nn::init::Scheme::none; learned position
  // tables are still drawn).
  explicit Transformer(const TransformerConfig& cfg, Generator& gen = default_generator(),
                       nn::init::Scheme init = nn::init::Scheme::xavier_uniform);

  // ---- Seq2Seq ----
  // src (B, S) i64, src_pad (B, S) u8 1 = padding (or undefined), tgt_in (B, T) i64 -> (B, T, V).
  Tensor forward(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in) override;
  // The generator's product and the loss together (linear_cross_entropy): no (B, T, V) logits.
  Tensor loss(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in, const Tensor& tgt_out, int64_t pad_id,
              double label_smoothing, Reduction reduction) override;
  std::unique_ptr<DecoderState> start(const Tensor& src, const Tensor& src_pad) override;
  // last_tokens (rows) or (rows, 1) i64 -> logits (rows, V). Runs under no-grad.
  Tensor step(DecoderState& state, const Tensor& last_tokens) override;
  // Per decoder layer (B, H, T, S), computed in eval mode (training flag restored after).
  AttentionMaps cross_attention(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in) override;
  int64_t src_vocab() const override { return cfg_.src_vocab; }
  int64_t tgt_vocab() const override { return cfg_.tgt_vocab; }
  int64_t max_len() const override { return cfg_.max_len; }

  // ---- pieces ----
  Tensor encode(const Tensor& src, const Tensor& src_pad) const;  // memory (B, S, D)
  // Decoder output after the final norm (B, T, D); cross_w receives per-layer weights if non-null.
  Tensor decode(const Tensor& tgt_in, const Tensor& memory, const Tensor& src_pad,
                std::vector<Tensor>* cross_w = nullptr) const;
  Tensor embed_source(const Tensor& src) const;                          // (B, S, D), dropout applied
  Tensor embed_target(const Tensor& tgt, int64_t offset = 0) const;      // positions offset..offset+T-1
  const TransformerConfig& config() const { return cfg_; }
  // int8 translation in less memory: the weights held in int8 (nn::Module::hold_weights_in_int8),
  // and oneDNN's blocked copy of the held rows (the panels layout), on which the 4-128 rows of a
  // search step run 10-30% faster than on the plain rows (1-3 rows stay on the held rows and
  // qkv's kernel): 2 bytes a weight, against 5 for f32 weights beside their int8 form.
  void hold_weights_in_int8_blocked();

  std::shared_ptr<nn::Embedding> src_embed, tgt_embed;  // the same object when shared
  std::shared_ptr<nn::SinusoidalPositionalEncoding> sinusoid;  // sinusoidal positions
  std::shared_ptr<nn::LearnedPositionalEmbedding> src_pos, tgt_pos;  // learned positions
  std::shared_ptr<Encoder> encoder;
  std::shared_ptr<Decoder> decoder;
  std::shared_ptr<OutputProjection> generator;  // (V, D) weight, (V) bias
  std::shared_ptr<nn::Dropout> dropout;

 private:
  Tensor check_ids(const Tensor& ids, int64_t vocab, const char* what) const;
  AttentionMask memory_mask(const Tensor& src_pad) const;
  TransformerConfig cfg_;
};

}  // namespace qkv::models
