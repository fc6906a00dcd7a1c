// qkv/models/gpt.h - the decoder-only Transformer (GPT: Radford et al. 2018, 2019).
//
//   h0     = Dropout(E_tok[ids] + E_pos[positions])                 (B, T, D)
//   h_l    = Block_l(h_{l-1})   causal self-attention + FFN, no cross-attention
//   logits = LN_f(h_L) E_tok^T                                      (B, T, V), the head tied
// GPT-2: pre-LN blocks (x + f(LN(x))), GELU tanh approximation, a final LayerNorm.
// GPT-1: post-LN blocks (LN(x + f(x))), no final LayerNorm. One key chooses: pre_norm.
//
// The blocks are models::DecoderBlock without cross-attention, so parameter names inside the
// model are qkv's (embed_tokens.weight, embed_positions.weight, decoder.layers.{i}.self_attn.q_proj,
// ..., decoder.layer_norm); io/gpt2.h maps them to and from the published GPT-2 layout.
// The config uses Hugging Face's GPT2Config keys (n_embd, n_layer, ...) plus pre_norm.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "qkv/models/transformer_blocks.h"
#include "qkv/ops/loss.h"

namespace qkv::models {

struct GptConfig {
  int64_t vocab_size = 50257, n_positions = 1024, n_embd = 768, n_layer = 12, n_head = 12;
  int64_t n_inner = 0;                        // FFN width; 0 (JSON null) = 4 * n_embd
  std::string activation_function = "gelu_new";  // gelu_new (tanh) | gelu | relu | silu (nn::parse_activation)
  double layer_norm_epsilon = 1e-5;
  double resid_pdrop = 0.1, embd_pdrop = 0.1, attn_pdrop = 0.1;
  bool pre_norm = true;  // GPT-2; false = GPT-1's post-LN blocks, no final LayerNorm

  int64_t d_ff() const { return n_inner > 0 ? n_inner : 4 * n_embd; }
  void validate() const;  // throws qkv::Error naming the key
  BlockOptions block_options() const;
};

// JSON: GPT2Config's keys. from_json starts from the defaults and rejects unknown keys, naming
// them; keys of Hugging Face's that carry no architecture (architectures, bos_token_id,
// initializer_range, summary_*, task_specific_params, ...) are accepted and ignored, and keys
// whose other values would change the computation (scale_attn_weights, add_cross_attention,
// scale_attn_by_inverse_layer_idx, reorder_and_upcast_attn, tie_word_embeddings, n_ctx) must
// have the value qkv computes with.
void to_json(nlohmann::json& j, const GptConfig& c);
void from_json(const nlohmann::json& j, GptConfig& c);

// Incremental-decoding state of a Gpt (models::Gpt::start/step; not recorded).
struct GptCache {
  std::vector<DecoderLayerCache> layers;  // one per block: cached K/V (+ key padding), projected memory
  int64_t length() const { return layers.empty() ? 0 : layers[0].self.length(); }  // positions cached
  void select_rows(const Tensor& index);  // i64 (R): keeps rows `index` in that order
};

class Gpt : public nn::Module {
 public:
  // GPT-2's initialisation: normal(0, 0.02) matrices and embeddings, zero biases, LayerNorm (1, 0).
  // init none: every weight zero and nothing drawn, for a loader that fills them all (io::load_gpt2).
  explicit Gpt(const GptConfig& cfg, Generator& gen = default_generator(),
               nn::init::Scheme init = nn::init::Scheme::normal_002);

  // ids (B, T) i64; key_pad (B, T) u8, 1 = padding (or undefined); position_ids (B, T) i64 (or
  // undefined: 0 .. T-1 in every row; left-padded rows need their own, counted from the first
  // token). Returns the last hidden states (B, T, D), after the final LayerNorm if any.
  Tensor hidden(const Tensor& ids, const Tensor& key_pad = {}, const Tensor& position_ids = {}) const;
  // Same arguments -> logits (B, T, V) through the tied head.
  Tensor forward(const Tensor& ids, const Tensor& key_pad = {}, const Tensor& position_ids = {}) const;
  // The causal LM loss of ids against targets (B, T) i64 (-100 ignored), summed or averaged:
  // cross_entropy(forward(ids, key_pad), targets, ...) through linear_cross_entropy, without the
  // (B, T, V) logits in memory (ops/loss.h). Training's loss; forward() serves the rest.
  Tensor lm_loss(const Tensor& ids, const Tensor& targets, double label_smoothing = 0.0,
                 Reduction reduction = Reduction::mean, const Tensor& key_pad = {}) const;
  // The same loss from hidden states (..., D) (hidden()'s) against targets (...).
  Tensor head_loss(const Tensor& hidden, const Tensor& targets, double label_smoothing, Reduction reduction) const;
  const GptConfig& config() const { return cfg_; }

  // ---- incremental decoding (not recorded: call under NoGradGuard, in eval mode) ----
  // A batch of prompts of different lengths is left-padded: the first step feeds the prompts
  // (B, T) with key_pad marking the padding and position_ids counted from each row's first real
  // token; each later step feeds one token per row. Padded positions are never attended to.
  GptCache start() const;
  // ids_new (B, t) i64 at position_ids (B, t) i64; key_pad (B, t) u8 (1 = padding, or undefined).
  // Appends to the cache and returns the logits (B, t, V), or (B, 1, V) of the last new
  // position only when last_only (what generation reads).
  Tensor step(const Tensor& ids_new, GptCache& cache, const Tensor& position_ids, const Tensor& key_pad = {},
              bool last_only = false) const;

  std::shared_ptr<nn::Embedding> embed_tokens, embed_positions;  // (V, D), (P, D)
  std::shared_ptr<nn::Dropout> dropout;
  std::shared_ptr<Decoder> decoder;  // n_layer blocks without cross-attention (+ layer_norm if pre-LN)

 private:
  GptConfig cfg_;
};

// GPT fine-tuned for classification (Radford et al. 2018, 3.3): the input is wrapped as
// [START] text [EXTRACT] (pairs: [START] a [DELIM] b [EXTRACT]) and a linear layer reads the last
// hidden state at [EXTRACT]; the tied LM head stays available for the auxiliary LM loss.
// Names: transformer.* (the Gpt), score.weight (C, D), no bias (Hugging Face's
// GPT2ForSequenceClassification).
class GptClassifier : public nn::Module {
 public:
  // body: a Gpt (e.g. pretrained, loaded by io::load_gpt2); the head starts N(0, 0.02), or zero
  // with init none (a loader fills it).
  GptClassifier(std::shared_ptr<Gpt> body, int64_t num_labels, Generator& gen = default_generator(),
                nn::init::Scheme init = nn::init::Scheme::normal_002);
  // ids, key_pad as Gpt::hidden; extract_pos (B) i64: where each row's [EXTRACT] stands.
  // Returns class logits (B, C); the body's hidden states (B, T, D) too when non-null, for the
  // auxiliary LM loss (Gpt::head_loss: no (B, T, V) logits in memory).
  Tensor forward(const Tensor& ids, const Tensor& key_pad, const Tensor& extract_pos,
                 Tensor* hidden = nullptr) const;

  std::shared_ptr<Gpt> transformer;
  std::shared_ptr<nn::Linear> score;  // (C, D)
  int64_t num_labels;
};

}  // namespace qkv::models
