#include "qkv/models/gpt.h"

#include "qkv/ops/elementwise.h"
#include "qkv/ops/matmul.h"
#include "qkv/ops/shape.h"

namespace qkv::models {

Gpt::Gpt(const GptConfig& cfg, Generator& gen, nn::init::Scheme init) : cfg_(cfg) {
  cfg_.validate();
  QKV_CHECK(init == nn::init::Scheme::normal_002 || init == nn::init::Scheme::none, "Gpt",
            "initialisation is normal_002 (GPT-2's) or none (a loader fills every weight)");
  // normal_002 keeps the pieces' own draws before the final one, as the models trained so far had
  // them (the default generator's stream is part of their reproducibility); none draws nothing.
  const bool draw = init != nn::init::Scheme::none;
  const auto embed_init = draw ? nn::init::Scheme::pytorch_default : nn::init::Scheme::none;
  BlockOptions blocks = cfg_.block_options();
  if (!draw) blocks.init = nn::init::Scheme::none;
  embed_tokens = register_module("embed_tokens",
                                 std::make_shared<nn::Embedding>(cfg.vocab_size, cfg.n_embd, -1, false, embed_init));
  embed_positions = register_module(
      "embed_positions", std::make_shared<nn::Embedding>(cfg.n_positions, cfg.n_embd, -1, false, embed_init));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(cfg.embd_pdrop));
  decoder = register_module("decoder", std::make_shared<Decoder>(blocks, cfg.n_layer, false));
  nn::initialize(*this, init, gen);  // none: zeros stay zeros
}

namespace {
// Position ids must index the position table: one past it was named as a token id ("embedding: id
// 9 ... out of range for a vocabulary of V = 4").
void check_positions(const Tensor& pos, int64_t n_positions, const char* who) {
  const Tensor c = pos.contiguous();  // itself, as decoding passes it: no copy per step
  const int64_t* p = c.data<int64_t>();
  for (int64_t i = 0; i < c.numel(); ++i)
    QKV_CHECK(p[i] >= 0 && p[i] < n_positions, who, "position id ", p[i], " is outside [0, n_positions = ",
              n_positions, ")");
}
}  // namespace

Tensor Gpt::hidden(const Tensor& ids, const Tensor& key_pad, const Tensor& position_ids) const {
  QKV_CHECK(ids.defined() && ids.ndim() == 2 && ids.dtype() == DType::i64, "Gpt", "ids must be (B, T) i64, got ",
            ids.defined() ? ids.str() : std::string("undefined"));
  const int64_t T = ids.size(1);
  QKV_CHECK(T <= cfg_.n_positions, "Gpt", "sequence of ", T, " tokens is longer than n_positions ", cfg_.n_positions);
  if (key_pad.defined())
    QKV_CHECK(key_pad.shape() == ids.shape(), "Gpt", "key_pad must be ", ids.str(), "-shaped, got ", key_pad.str());
  Tensor pos = position_ids;  // (B, T) or (T)
  if (pos.defined()) {
    QKV_CHECK(pos.shape() == ids.shape() && pos.dtype() == DType::i64, "Gpt",
              "position_ids must be (B, T) i64 like ids ", ids.str(), ", got ", pos.str());
    check_positions(pos, cfg_.n_positions, "Gpt");
  } else {
    pos = Tensor::arange(T, DType::i64);
  }
  // Embedding checks every id against its table: a token id >= vocab_size or a position >= n_positions throws.
  Tensor h = dropout->forward(add(embed_tokens->forward(ids), embed_positions->forward(pos)));  // (B, T, D)
  AttentionMask mask;
  mask.causal = true;
  mask.key_padding = key_pad;
  for (auto& block : *decoder->layers) h = block->forward(h, Tensor(), mask, {});
  return decoder->layer_norm ? decoder->layer_norm->forward(h) : h;
}

Tensor Gpt::forward(const Tensor& ids, const Tensor& key_pad, const Tensor& position_ids) const {
  return embed_tokens->tied_logits(hidden(ids, key_pad, position_ids));  // (B, T, V), head tied to E_tok
}

Tensor Gpt::lm_loss(const Tensor& ids, const Tensor& targets, double label_smoothing, Reduction reduction,
                    const Tensor& key_pad) const {
  return head_loss(hidden(ids, key_pad), targets, label_smoothing, reduction);
}

Tensor Gpt::head_loss(const Tensor& h, const Tensor& targets, double label_smoothing, Reduction reduction) const {
  return linear_cross_entropy(h, embed_tokens->weight, Tensor(), targets, -100, label_smoothing, reduction);
}

void GptCache::select_rows(const Tensor& index) {
  for (auto& l : layers) l.select_rows(index);
}

GptCache Gpt::start() const {
  GptCache c;
  c.layers = decoder->start(Tensor());
  return c;
}

Tensor Gpt::step(const Tensor& ids_new, GptCache& cache, const Tensor& position_ids, const Tensor& key_pad,
                 bool last_only) const {
  QKV_CHECK(ids_new.defined() && ids_new.ndim() == 2 && ids_new.dtype() == DType::i64, "Gpt::step",
            "ids must be (B, t) i64, got ", ids_new.defined() ? ids_new.str() : std::string("undefined"));
  QKV_CHECK(position_ids.defined() && position_ids.shape() == ids_new.shape() && position_ids.dtype() == DType::i64,
            "Gpt::step", "position_ids must be (B, t) i64 like ids ", ids_new.str(), ", got ",
            position_ids.defined() ? position_ids.str() : std::string("undefined"));
  check_positions(position_ids, cfg_.n_positions, "Gpt::step");
  QKV_CHECK(cache.layers.size() == decoder->layers->size(), "Gpt::step", "cache of ", cache.layers.size(),
            " layers for a model of ", decoder->layers->size(), " (use Gpt::start)");
  const int64_t t = ids_new.size(1);
  // Embedding checks every id and position against its table (>= vocab_size / n_positions throws).
  Tensor h = dropout->forward(add(embed_tokens->forward(ids_new), embed_positions->forward(position_ids)));  // (B, t, D)
  h = decoder->step(h, cache.layers, AttentionMask{}, key_pad);  // (B, t, D), after the final LayerNorm if any
  if (last_only && t > 1) h = contiguous(slice(h, 1, t - 1, t));  // (B, 1, D)
  return embed_tokens->tied_logits_packed(h);  // (B, t|1, V), the head tied to E_tok
}

GptClassifier::GptClassifier(std::shared_ptr<Gpt> body, int64_t labels, Generator& gen, nn::init::Scheme init)
    : num_labels(labels) {
  QKV_CHECK(body != nullptr, "GptClassifier", "needs a Gpt");
  QKV_CHECK(labels >= 2, "GptClassifier", "num_labels must be >= 2, got ", labels);
  QKV_CHECK(init == nn::init::Scheme::normal_002 || init == nn::init::Scheme::none, "GptClassifier",
            "initialisation is normal_002 or none (a loader fills the head)");
  transformer = register_module("transformer", std::move(body));
  // normal_002 keeps the Linear's own (default) draw first, as before: the default generator's
  // stream is part of a fine-tuning run's reproducibility.
  const auto own = init == nn::init::Scheme::none ? nn::init::Scheme::none : nn::init::Scheme::pytorch_default;
  score = register_module("score", std::make_shared<nn::Linear>(transformer->config().n_embd, labels, false, own));
  nn::initialize(*score, init, gen);
}

Tensor GptClassifier::forward(const Tensor& ids, const Tensor& key_pad, const Tensor& extract_pos,
                              Tensor* hidden) const {
  Tensor h = transformer->hidden(ids, key_pad);  // (B, T, D)
  const int64_t B = h.size(0), T = h.size(1);
  QKV_CHECK(extract_pos.defined() && extract_pos.dtype() == DType::i64 && extract_pos.shape() == Shape{B},
            "GptClassifier", "extract_pos must be (", B, ") i64, got ",
            extract_pos.defined() ? extract_pos.str() : std::string("undefined"));
  std::vector<int64_t> rows = extract_pos.to_vector<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    QKV_CHECK(rows[size_t(b)] >= 0 && rows[size_t(b)] < T, "GptClassifier", "row ", b, ": [EXTRACT] position ",
              rows[size_t(b)], " outside [0, ", T, ")");
    rows[size_t(b)] += b * T;  // row of the flattened (B * T, D) states
  }
  Tensor at = index_select(reshape(h, {B * T, h.size(2)}), 0, Tensor::from_vector(rows, {B}));  // (B, D)
  if (hidden) *hidden = h;
  return score->forward(at);  // (B, C)
}

}  // namespace qkv::models
