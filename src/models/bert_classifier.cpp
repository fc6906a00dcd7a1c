#include "qkv/models/bert_classifier.h"

#include "qkv/ops/elementwise.h"
#include "qkv/ops/reduce.h"
#include "qkv/ops/shape.h"

namespace qkv::models {

BertClsPooling parse_bert_cls_pooling(const std::string& name) {
  if (name == "pooler") return BertClsPooling::pooler;
  if (name == "mean") return BertClsPooling::mean;
  fail("pooling", "unknown pooling '", name, "' (expected \"pooler\" or \"mean\")");
}

const char* bert_cls_pooling_name(BertClsPooling p) { return p == BertClsPooling::mean ? "mean" : "pooler"; }

BertForSequenceClassification::BertForSequenceClassification(std::shared_ptr<Bert> b, int64_t labels, double p,
                                                             BertClsPooling pool, std::shared_ptr<nn::Linear> head,
                                                             Generator& gen)
    : num_labels(labels), pooling(pool) {
  QKV_CHECK(b != nullptr, "BertForSequenceClassification", "needs a Bert");
  QKV_CHECK(labels >= 2, "BertForSequenceClassification", "num_labels must be >= 2, got ", labels);
  if (p < 0) p = b->config().hidden_dropout_prob;
  QKV_CHECK(p < 1, "BertForSequenceClassification", "classifier_dropout must be in [0, 1), got ", p);
  const int64_t D = b->config().hidden_size;
  bert = register_module("bert", std::move(b));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(p));
  if (head) {
    QKV_CHECK(head->weight.shape() == Shape({labels, D}) && head->bias.defined(), "BertForSequenceClassification",
              "the classifier must be Linear(", D, ", ", labels, ") with a bias, got weight ", head->weight.str());
  } else {
    head = std::make_shared<nn::Linear>(D, labels, true, nn::init::Scheme::none);
    nn::initialize(*head, nn::init::Scheme::normal_002, gen);
  }
  classifier = register_module("classifier", std::move(head));
}

Tensor BertForSequenceClassification::pooled(const Tensor& ids, const Tensor& token_type_ids,
                                             const Tensor& key_pad) const {
  if (pooling == BertClsPooling::pooler) return bert->forward(ids, token_type_ids, key_pad).pooled;
  Tensor h = bert->hidden(ids, token_type_ids, key_pad);  // (B, T, D)
  const int64_t B = h.size(0), T = h.size(1);
  // w[b, t] = 1 / (real tokens of row b) on real tokens, 0 on padding: sum_t w h = the mean.
  std::vector<float> w(size_t(B * T), 1.0f / float(T));
  if (key_pad.defined()) {
    const Tensor kp = key_pad.contiguous().to(DType::u8);
    const uint8_t* p = kp.data<uint8_t>();
    for (int64_t r = 0; r < B; ++r) {
      int64_t n = 0;
      for (int64_t t = 0; t < T; ++t) n += p[r * T + t] == 0;
      QKV_CHECK(n > 0, "BertForSequenceClassification", "row ", r, " is all padding");
      for (int64_t t = 0; t < T; ++t) w[size_t(r * T + t)] = p[r * T + t] == 0 ? 1.0f / float(n) : 0.0f;
    }
  }
  Tensor wt = Tensor::from_vector(w, {B, T, 1}).to(h.dtype());  // (B, T, 1)
  return sum(mul(h, wt), {1});                                  // (B, D)
}

Tensor BertForSequenceClassification::forward(const Tensor& ids, const Tensor& token_type_ids,
                                              const Tensor& key_pad) const {
  return classifier->forward(dropout->forward(pooled(ids, token_type_ids, key_pad)));  // (B, C)
}

Tensor BertForSequenceClassification::pooled_packed(const Tensor& ids, const Tensor& token_type_ids,
                                                    const std::vector<int64_t>& lengths) const {
  const Tensor h = bert->hidden_packed(ids, token_type_ids, lengths);  // (1, N, D)
  const Tensor rows = reshape(h, {h.size(1), h.size(2)});             // (N, D)
  const int64_t B = int64_t(lengths.size());
  if (pooling == BertClsPooling::pooler) {
    QKV_CHECK(bert->pooler != nullptr, "BertForSequenceClassification", "pooling \"pooler\" needs the Bert's pooler");
    std::vector<int64_t> cls(size_t(B), 0);  // each row's [CLS], its first position
    for (int64_t r = 1; r < B; ++r) cls[size_t(r)] = cls[size_t(r - 1)] + lengths[size_t(r - 1)];
    return bert->pooler->forward(reshape(index_select(rows, 0, Tensor::from_vector(cls, {B})), {B, 1, h.size(2)}));
  }
  std::vector<Tensor> means;  // (1, D) per row: the average over its tokens
  int64_t start = 0;
  for (int64_t len : lengths) {
    means.push_back(mean(slice(rows, 0, start, start + len), {0}, /*keepdim=*/true));
    start += len;
  }
  return concat(means, 0);  // (B, D)
}

Tensor BertForSequenceClassification::forward_packed(const Tensor& ids, const Tensor& token_type_ids,
                                                     const std::vector<int64_t>& lengths) const {
  return classifier->forward(dropout->forward(pooled_packed(ids, token_type_ids, lengths)));  // (B, C)
}

}  // namespace qkv::models
