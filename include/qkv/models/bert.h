// qkv/models/bert.h - the bidirectional Transformer encoder (BERT: Devlin et al. 2019).
//
//   h0     = Dropout(LN(E_word[ids] + E_pos[positions] + E_type[token_type_ids]))   (B, T, D)
//   h_l    = Block_l(h_{l-1})   post-LN: x = LN(x + Dropout(SelfAttn(x))); x = LN(x + Dropout(FFN(x)))
//   pooled = tanh(W_p h_L[:, 0] + b_p)                                               (B, D)
// Self-attention sees every real token in both directions; padding keys (key_pad) are masked.
//
// The heads are separate modules over the encoder's outputs, so a task builds only the ones it
// needs (pretraining: MLM + NSP; sentence classification, tagging and QA later):
//   BertMlmHead:  logits = LN(act(W_t h + b_t)) E_word^T + b     (B, T, V), decoder tied to E_word
//   BertNspHead:  logits = W_s pooled + b_s                        (B, 2)
//
// Names inside the model are qkv's: embeddings.{word_embeddings, position_embeddings,
// token_type_embeddings, LayerNorm}, encoder.layers.{i}.self_attn.{q,k,v,out}_proj,
// self_attn_layer_norm, fc1, fc2, final_layer_norm (models::Encoder, post-LN), pooler.dense;
// heads: transform.dense, transform.LayerNorm, bias / seq_relationship. io/bert.h maps them to
// and from Hugging Face's published layout (bert.encoder.layer.{i}.attention.self.query, ...).
// The config uses Hugging Face's BertConfig keys.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qkv/models/transformer_blocks.h"
#include "qkv/ops/loss.h"
#include "qkv/ops/packed.h"

namespace qkv::models {

struct BertConfig {
  int64_t vocab_size = 30522, hidden_size = 768, num_hidden_layers = 12, num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  std::string hidden_act = "gelu";  // gelu (erf) | gelu_new / gelu_pytorch_tanh (tanh) | relu | silu
  double hidden_dropout_prob = 0.1, attention_probs_dropout_prob = 0.1;
  int64_t max_position_embeddings = 512, type_vocab_size = 2;
  double layer_norm_eps = 1e-12;
  int64_t pad_token_id = 0;  // the word embedding's padding row (zero, no gradient: torch's padding_idx)
  std::string position_embedding_type = "absolute";  // the only kind qkv implements

  void validate() const;  // throws qkv::Error naming the key
  BlockOptions block_options() const;
};

// JSON: BertConfig's keys. from_json starts from the defaults and rejects unknown keys, naming
// them; Hugging Face's keys that carry no architecture (architectures, initializer_range,
// use_cache, classifier_dropout, id2label, ...) are accepted and ignored; keys whose other values
// would change the computation (is_decoder, add_cross_attention, tie_word_embeddings,
// position_embedding_type) must have the value qkv computes with.
void to_json(nlohmann::json& j, const BertConfig& c);
void from_json(const nlohmann::json& j, BertConfig& c);

// Token + position + segment embeddings, LayerNorm, dropout.
class BertEmbeddings : public nn::Module {
 public:
  explicit BertEmbeddings(const BertConfig& cfg);
  // ids, token_type_ids, position_ids (B, T) i64 (types / positions may be undefined: all 0 /
  // 0 .. T-1) -> (B, T, D).
  Tensor forward(const Tensor& ids, const Tensor& token_type_ids = {}, const Tensor& position_ids = {}) const;

  std::shared_ptr<nn::Embedding> word_embeddings, position_embeddings, token_type_embeddings;
  std::shared_ptr<nn::LayerNorm> layer_norm;  // registered as "LayerNorm"
  std::shared_ptr<nn::Dropout> dropout;

 private:
  int64_t max_positions_, type_vocab_;
};

// tanh(Linear(h[:, 0])): the [CLS] state through a dense layer (BERT's pooler).
class BertPooler : public nn::Module {
 public:
  explicit BertPooler(int64_t hidden);
  Tensor forward(const Tensor& hidden) const;  // (B, T, D) -> (B, D)
  std::shared_ptr<nn::Linear> dense;
};

struct BertOutput {
  Tensor hidden;  // (B, T, D) the last layer's states
  Tensor pooled;  // (B, D) the pooler's output (undefined for a Bert without a pooler)
};

// Sequences laid end to end in one row for the packed entry points (Bert::hidden_packed and the
// heads' forward_packed): add() each, then ids() and token_types() are (1, N) i64, N the sum of
// lengths(), and sequence r lies at [start(r), start(r) + lengths()[r]).
class PackedSequences {
 public:
  // ids non-empty; types one per id, or empty for segment 0. Any integer type (QA features hold
  // int32).
  template <typename I>
  void add(const std::vector<I>& ids, const std::vector<I>& types = {}) {
    check(ids.size(), types.size());
    starts_.push_back(int64_t(ids_.size()));
    lengths_.push_back(int64_t(ids.size()));
    ids_.insert(ids_.end(), ids.begin(), ids.end());
    if (types.empty())
      types_.resize(ids_.size(), 0);
    else
      types_.insert(types_.end(), types.begin(), types.end());
  }
  Tensor ids() const { return Tensor::from_vector(ids_, {1, int64_t(ids_.size())}); }
  Tensor token_types() const { return Tensor::from_vector(types_, {1, int64_t(types_.size())}); }
  const std::vector<int64_t>& lengths() const { return lengths_; }
  int64_t start(size_t r) const { return starts_[r]; }

 private:
  void check(size_t ids, size_t types) const;  // names the sequence and its sizes
  std::vector<int64_t> ids_, types_, lengths_, starts_;
};

// BertModel: embeddings, post-LN encoder, pooler. init normal_002 is Hugging Face's
// initialisation (normal(0, 0.02) matrices and embeddings, zero biases and padding row, LayerNorm
// (1, 0)) drawn from gen; none leaves zeros for a model whose tensors are loaded next (no draws).
// add_pooling_layer = false (Hugging Face's BertModel(add_pooling_layer=False), what
// BertForTokenClassification builds) leaves pooler null: forward() then returns no pooled output.
class Bert : public nn::Module {
 public:
  explicit Bert(const BertConfig& cfg, Generator& gen = default_generator(),
                nn::init::Scheme init = nn::init::Scheme::normal_002, bool add_pooling_layer = true);
  // ids (B, T) i64; token_type_ids (B, T) i64 (or undefined: all segment 0); key_pad (B, T) u8,
  // 1 = padding (or undefined). T > max_position_embeddings is an error naming that key.
  Tensor hidden(const Tensor& ids, const Tensor& token_type_ids = {}, const Tensor& key_pad = {}) const;
  BertOutput forward(const Tensor& ids, const Tensor& token_type_ids = {}, const Tensor& key_pad = {}) const;
  // Padding-free: the rows of a batch end to end. ids, token_type_ids (1, N) i64 with N the sum of
  // `lengths`; each row attends only to itself (AttentionMask::packed_lengths) and its positions
  // count from 0. -> (1, N, D): row r's states at [lengths[0] + ... + lengths[r - 1], + lengths[r]),
  // the states hidden() gives that row in a padded batch, without the padding's work.
  Tensor hidden_packed(const Tensor& ids, const Tensor& token_type_ids, const std::vector<int64_t>& lengths) const;
  const BertConfig& config() const { return cfg_; }

  std::shared_ptr<BertEmbeddings> embeddings;
  std::shared_ptr<Encoder> encoder;  // num_hidden_layers post-LN EncoderBlocks
  std::shared_ptr<BertPooler> pooler;  // null without a pooling layer

 private:
  BertConfig cfg_;
};

// LN(act(W_t h + b_t)): the MLM head's transform (Hugging Face's cls.predictions.transform).
class BertPredictionTransform : public nn::Module {
 public:
  explicit BertPredictionTransform(const BertConfig& cfg);
  Tensor forward(const Tensor& hidden) const;  // (B, T, D) -> (B, T, D)
  std::shared_ptr<nn::Linear> dense;
  std::shared_ptr<nn::LayerNorm> layer_norm;  // registered as "LayerNorm"
  nn::Activation act;
};

// Masked-language-model head (Hugging Face's cls.predictions): the decoder's weight is the word
// embedding matrix it is given (tied, not a parameter of the head), with the head's own bias.
class BertMlmHead : public nn::Module {
 public:
  BertMlmHead(const BertConfig& cfg, Tensor word_embeddings, Generator& gen = default_generator());
  Tensor forward(const Tensor& hidden) const;  // (B, T, D) -> logits (B, T, V)
  // The MLM loss of hidden (B, T, D) against labels (B, T) i64 (-100: not predicted), summed or
  // averaged over the labelled positions. Only their rows go through the transform and the
  // decoder (about 15% of a batch), by linear_cross_entropy (ops/loss.h): no (B, T, V) logits.
  Tensor loss(const Tensor& hidden, const Tensor& labels, Reduction reduction) const;

  std::shared_ptr<BertPredictionTransform> transform;
  Tensor bias;            // (V), zero-initialised
  Tensor decoder_weight;  // (V, D): the tied word embeddings (the Bert's parameter, not this head's)

 private:
  PackedWeights packed_;  // the decoder's converted form for bf16 / int8 inference
};

// Next-sentence-prediction head (Hugging Face's cls.seq_relationship): 0 = B follows A, 1 = random.
class BertNspHead : public nn::Module {
 public:
  explicit BertNspHead(const BertConfig& cfg, Generator& gen = default_generator());
  Tensor forward(const Tensor& pooled) const;  // (B, D) -> logits (B, 2)
  std::shared_ptr<nn::Linear> seq_relationship;
};

// The encoder and both pretraining heads as one module (its parameters: bert.*, mlm.*, nsp.*),
// what pretraining optimises.
class BertForPreTraining : public nn::Module {
 public:
  BertForPreTraining(std::shared_ptr<Bert> bert, std::shared_ptr<BertMlmHead> mlm, std::shared_ptr<BertNspHead> nsp);
  struct Logits {
    Tensor mlm;  // (B, T, V)
    Tensor nsp;  // (B, 2)
  };
  Logits forward(const Tensor& ids, const Tensor& token_type_ids, const Tensor& key_pad) const;

  std::shared_ptr<Bert> bert;
  std::shared_ptr<BertMlmHead> mlm;
  std::shared_ptr<BertNspHead> nsp;
};

}  // namespace qkv::models
