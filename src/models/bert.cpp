#include "qkv/models/bert.h"

#include "qkv/ops/elementwise.h"
#include "qkv/ops/matmul.h"
#include "qkv/ops/packed.h"
#include "qkv/ops/shape.h"

namespace qkv::models {

namespace {

// Every id of a (B, T) i64 tensor in [0, limit): an error names the config key it exceeds.
void check_ids(const Tensor& ids, int64_t limit, const char* what, const char* key) {
  const Tensor c = ids.contiguous();
  const int64_t* p = c.data<int64_t>();
  for (int64_t i = 0; i < c.numel(); ++i)
    QKV_CHECK(p[i] >= 0 && p[i] < limit, "Bert", what, " ", p[i], " at row ", i / c.size(1), ", position ",
              i % c.size(1), " is outside [0, ", key, " = ", limit, ")");
}

void check_bt(const Tensor& t, const Tensor& ids, const char* what, DType dtype) {
  QKV_CHECK(t.shape() == ids.shape() && t.dtype() == dtype, "Bert", what, " must be (B, T) ", dtype_name(dtype),
            " like ids ", ids.str(), ", got ", t.str());
}

}  // namespace

// ---------------------------------------------------------------- embeddings

BertEmbeddings::BertEmbeddings(const BertConfig& cfg)
    : max_positions_(cfg.max_position_embeddings), type_vocab_(cfg.type_vocab_size) {
  const auto init = nn::init::Scheme::none;  // the owner initialises (Bert's constructor)
  word_embeddings = register_module(
      "word_embeddings", std::make_shared<nn::Embedding>(cfg.vocab_size, cfg.hidden_size, cfg.pad_token_id, false, init));
  position_embeddings = register_module(
      "position_embeddings", std::make_shared<nn::Embedding>(cfg.max_position_embeddings, cfg.hidden_size, -1, false, init));
  token_type_embeddings = register_module(
      "token_type_embeddings", std::make_shared<nn::Embedding>(cfg.type_vocab_size, cfg.hidden_size, -1, false, init));
  layer_norm = register_module("LayerNorm", std::make_shared<nn::LayerNorm>(cfg.hidden_size, cfg.layer_norm_eps));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(cfg.hidden_dropout_prob));
}

Tensor BertEmbeddings::forward(const Tensor& ids, const Tensor& token_type_ids, const Tensor& position_ids) const {
  QKV_CHECK(ids.defined() && ids.ndim() == 2 && ids.dtype() == DType::i64, "Bert", "ids must be (B, T) i64, got ",
            ids.defined() ? ids.str() : std::string("undefined"));
  const int64_t T = ids.size(1);
  check_ids(ids, word_embeddings->weight.size(0), "token id", "vocab_size");
  Tensor types = token_type_ids.defined() ? token_type_ids : Tensor::zeros(ids.shape(), DType::i64);  // (B, T)
  if (token_type_ids.defined()) {
    check_bt(types, ids, "token_type_ids", DType::i64);
    check_ids(types, type_vocab_, "token type id", "type_vocab_size");
  }
  Tensor pos;  // (B, T) or (T)
  if (position_ids.defined()) {
    check_bt(position_ids, ids, "position_ids", DType::i64);
    check_ids(position_ids, max_positions_, "position", "max_position_embeddings");
    pos = position_ids;
  } else {
    QKV_CHECK(T <= max_positions_, "Bert", "input of ", T, " tokens is longer than max_position_embeddings = ",
              max_positions_);
    pos = Tensor::arange(T, DType::i64);
  }
  Tensor e = add(add(word_embeddings->forward(ids), position_embeddings->forward(pos)),
                 token_type_embeddings->forward(types));  // (B, T, D)
  return dropout->forward(layer_norm->forward(e));
}

// ---------------------------------------------------------------- BertModel

BertPooler::BertPooler(int64_t hidden) {
  dense = register_module("dense", std::make_shared<nn::Linear>(hidden, hidden, true, nn::init::Scheme::none));
}

Tensor BertPooler::forward(const Tensor& hidden) const {
  Tensor cls = squeeze(slice(hidden, 1, 0, 1), 1);  // (B, D): the [CLS] position
  return tanh(dense->forward(cls));
}

Bert::Bert(const BertConfig& cfg, Generator& gen, nn::init::Scheme init, bool add_pooling_layer) : cfg_(cfg) {
  cfg_.validate();
  QKV_CHECK(init == nn::init::Scheme::normal_002 || init == nn::init::Scheme::none, "Bert",
            "initialisation is normal_002 (Hugging Face's) or none");
  BlockOptions blocks = cfg_.block_options();
  blocks.init = nn::init::Scheme::none;  // every piece built as zeros, then drawn once below
  embeddings = register_module("embeddings", std::make_shared<BertEmbeddings>(cfg_));
  encoder = register_module("encoder", std::make_shared<Encoder>(blocks, cfg_.num_hidden_layers));
  if (add_pooling_layer) pooler = register_module("pooler", std::make_shared<BertPooler>(cfg_.hidden_size));
  nn::initialize(*this, init, gen);  // LayerNorms stay (1, 0), the padding row 0
}

Tensor Bert::hidden(const Tensor& ids, const Tensor& token_type_ids, const Tensor& key_pad) const {
  Tensor h = embeddings->forward(ids, token_type_ids);  // (B, T, D)
  AttentionMask mask;  // bidirectional: only padding keys are hidden
  if (key_pad.defined()) {
    check_bt(key_pad, ids, "key_pad", key_pad.dtype());
    mask.key_padding = key_pad;
  }
  return encoder->forward(h, mask);
}

void PackedSequences::check(size_t ids, size_t types) const {
  QKV_CHECK(ids > 0 && (types == 0 || types == ids), "PackedSequences", "sequence ", lengths_.size(),
            ": expected a non-empty sequence and one token type per id, got ", ids, " ids and ", types, " types");
}

Tensor Bert::hidden_packed(const Tensor& ids, const Tensor& token_type_ids, const std::vector<int64_t>& lengths) const {
  QKV_CHECK(ids.defined() && ids.ndim() == 2 && ids.size(0) == 1 && ids.dtype() == DType::i64, "Bert",
            "packed ids must be (1, N) i64, got ", ids.defined() ? ids.str() : std::string("undefined"));
  int64_t sum = 0;
  for (int64_t len : lengths) {
    QKV_CHECK(len > 0 && len <= cfg_.max_position_embeddings, "Bert", "a packed row of ", len,
              " tokens: expected 1 to max_position_embeddings = ", cfg_.max_position_embeddings);
    sum += len;
  }
  QKV_CHECK(sum == ids.size(1), "Bert", "packed lengths sum to ", sum, ", expected the ", ids.size(1), " ids");
  std::vector<int64_t> pos;  // each row's positions from 0
  pos.reserve(size_t(sum));
  for (int64_t len : lengths)
    for (int64_t t = 0; t < len; ++t) pos.push_back(t);
  Tensor h = embeddings->forward(ids, token_type_ids, Tensor::from_vector(pos, {1, ids.size(1)}));
  AttentionMask mask;
  mask.packed_lengths = lengths;
  return encoder->forward(h, mask);
}

BertOutput Bert::forward(const Tensor& ids, const Tensor& token_type_ids, const Tensor& key_pad) const {
  BertOutput o;
  o.hidden = hidden(ids, token_type_ids, key_pad);
  if (pooler) o.pooled = pooler->forward(o.hidden);
  return o;
}

// ---------------------------------------------------------------- heads

BertPredictionTransform::BertPredictionTransform(const BertConfig& cfg) : act(nn::parse_activation(cfg.hidden_act)) {
  dense = register_module("dense", std::make_shared<nn::Linear>(cfg.hidden_size, cfg.hidden_size, true,
                                                                nn::init::Scheme::none));  // the head draws it
  layer_norm = register_module("LayerNorm", std::make_shared<nn::LayerNorm>(cfg.hidden_size, cfg.layer_norm_eps));
}

Tensor BertPredictionTransform::forward(const Tensor& hidden) const {
  return layer_norm->forward(nn::activate(dense->forward(hidden), act));
}

BertMlmHead::BertMlmHead(const BertConfig& cfg, Tensor word_embeddings, Generator& gen)
    : decoder_weight(std::move(word_embeddings)) {
  QKV_CHECK(decoder_weight.defined() && decoder_weight.shape() == Shape({cfg.vocab_size, cfg.hidden_size}),
            "BertMlmHead", "the tied decoder needs the (vocab_size, hidden_size) = (", cfg.vocab_size, ", ",
            cfg.hidden_size, ") word embeddings, got ",
            decoder_weight.defined() ? decoder_weight.str() : std::string("undefined"));
  transform = register_module("transform", std::make_shared<BertPredictionTransform>(cfg));
  bias = register_parameter("bias", Tensor::zeros({cfg.vocab_size}));
  nn::initialize(*transform, nn::init::Scheme::normal_002, gen);
}

Tensor BertMlmHead::forward(const Tensor& hidden) const {
  const Tensor h = transform->forward(hidden);
  if (use_cached_low_precision(h, decoder_weight))  // bf16 / int8 inference, or the table held in bf16
    return linear_packed(h, *packed_.get({decoder_weight}, {bias}));
  return linear(h, decoder_weight, bias);  // (B, T, V): decoder tied to E_word
}

Tensor BertMlmHead::loss(const Tensor& hidden, const Tensor& labels, Reduction reduction) const {
  const int64_t D = hidden.size(-1);
  QKV_CHECK(labels.dtype() == DType::i64 && labels.numel() * D == hidden.numel(), "BertMlmHead::loss",
            "labels must be i64 with one entry per position of hidden ", hidden.str(), ", got ", labels.str());
  const Tensor lc = labels.contiguous();
  const int64_t* lab = lc.data<int64_t>();
  std::vector<int64_t> rows, targets;  // the labelled positions (flat) and their labels
  for (int64_t i = 0; i < lc.numel(); ++i)
    if (lab[i] != -100) rows.push_back(i), targets.push_back(lab[i]);
  const int64_t P = int64_t(rows.size());
  const Tensor h = index_select(reshape(hidden, {-1, D}), 0, Tensor::from_vector(rows, {P}));  // (P, D)
  return linear_cross_entropy(transform->forward(h), decoder_weight, bias, Tensor::from_vector(targets, {P}), -100,
                              0.0, reduction);
}

BertNspHead::BertNspHead(const BertConfig& cfg, Generator& gen) {
  seq_relationship = register_module(
      "seq_relationship", std::make_shared<nn::Linear>(cfg.hidden_size, 2, true, nn::init::Scheme::none));
  nn::initialize(*this, nn::init::Scheme::normal_002, gen);
}

Tensor BertNspHead::forward(const Tensor& pooled) const { return seq_relationship->forward(pooled); }

BertForPreTraining::BertForPreTraining(std::shared_ptr<Bert> b, std::shared_ptr<BertMlmHead> m,
                                       std::shared_ptr<BertNspHead> n) {
  QKV_CHECK(b && m && n, "BertForPreTraining", "needs the encoder, the MLM head and the NSP head");
  QKV_CHECK(m->decoder_weight.same(b->embeddings->word_embeddings->weight), "BertForPreTraining",
            "the MLM head's decoder must be tied to this encoder's word embeddings");
  bert = register_module("bert", std::move(b));
  mlm = register_module("mlm", std::move(m));
  nsp = register_module("nsp", std::move(n));
}

BertForPreTraining::Logits BertForPreTraining::forward(const Tensor& ids, const Tensor& token_type_ids,
                                                       const Tensor& key_pad) const {
  BertOutput o = bert->forward(ids, token_type_ids, key_pad);
  return {mlm->forward(o.hidden), nsp->forward(o.pooled)};
}

}  // namespace qkv::models
