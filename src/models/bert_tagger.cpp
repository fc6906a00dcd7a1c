#include "qkv/models/bert_tagger.h"

#include "qkv/ops/loss.h"

namespace qkv::models {

BertForTokenClassification::BertForTokenClassification(std::shared_ptr<Bert> b, int64_t num_labels, double p,
                                                       Generator& gen)
    : num_labels_(num_labels) {
  QKV_CHECK(b != nullptr, "BertForTokenClassification", "needs an encoder");
  QKV_CHECK(b->pooler == nullptr, "BertForTokenClassification",
            "the encoder must have no pooler (Bert(..., add_pooling_layer = false)), as Hugging Face's");
  QKV_CHECK(num_labels >= 1, "BertForTokenClassification", "num_labels must be >= 1, got ", num_labels);
  QKV_CHECK(p >= 0 && p < 1, "BertForTokenClassification", "dropout must be in [0, 1), got ", p);
  const int64_t D = b->config().hidden_size;
  bert = register_module("bert", std::move(b));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(p));
  classifier = register_module("classifier",
                               std::make_shared<nn::Linear>(D, num_labels, true, nn::init::Scheme::none));
  nn::initialize(*classifier, nn::init::Scheme::normal_002, gen);
}

Tensor BertForTokenClassification::forward(const Tensor& ids, const Tensor& key_pad) const {
  Tensor h = bert->hidden(ids, Tensor(), key_pad);  // (B, T, D), segment 0 everywhere
  return classifier->forward(dropout->forward(h));  // (B, T, C)
}

Tensor BertForTokenClassification::forward_packed(const Tensor& ids, const std::vector<int64_t>& lengths) const {
  Tensor h = bert->hidden_packed(ids, Tensor(), lengths);  // (1, N, D), segment 0 everywhere
  return classifier->forward(dropout->forward(h));         // (1, N, C)
}

Tensor BertForTokenClassification::loss(const Tensor& logits, const Tensor& labels, bool sum) const {
  QKV_CHECK(logits.ndim() == 3 && labels.ndim() == 2 && labels.size(0) == logits.size(0) &&
                labels.size(1) == logits.size(1) && labels.dtype() == DType::i64,
            "BertForTokenClassification", "labels must be (B, T) i64 like the logits ", logits.str(), ", got ",
            labels.str());
  return cross_entropy(logits, labels, -100, 0.0, sum ? Reduction::sum : Reduction::mean);
}

}  // namespace qkv::models
