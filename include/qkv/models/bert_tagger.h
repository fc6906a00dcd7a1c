// qkv/models/bert_tagger.h - BERT for token classification (tagging, NER): Hugging Face's
// BertForTokenClassification.
//
//   h      = Bert(ids, key_pad)              (B, T, D)   the encoder without a pooler
//   logits = W_c Dropout(h) + b_c            (B, T, C)   one score per label at every position
//   loss   = mean over positions whose label is not -100 of CE(logits, label)
//
// Parameters: bert.* (the encoder, qkv's names inside models::Bert) and classifier.{weight, bias};
// io/bert_tagger.h maps them to the published names (bert.encoder.layer.{i}..., classifier.*).
// The classifier is drawn as Hugging Face draws it: N(0, 0.02) weight, zero bias.
#pragma once
#include <memory>

#include "qkv/models/bert.h"

namespace qkv::models {

class BertForTokenClassification : public nn::Module {
 public:
  // bert must have been built without a pooling layer (add_pooling_layer = false); dropout is
  // the dropout before the classifier (classifier_dropout, else hidden_dropout_prob).
  BertForTokenClassification(std::shared_ptr<Bert> bert, int64_t num_labels, double dropout,
                             Generator& gen = default_generator());
  // ids (B, T) i64, key_pad (B, T) u8 (1 = padding) or undefined -> logits (B, T, num_labels).
  Tensor forward(const Tensor& ids, const Tensor& key_pad = {}) const;
  // B rows packed end to end without padding: ids (1, N), N the sum of lengths -> logits (1, N, C)
  // (Bert::hidden_packed).
  Tensor forward_packed(const Tensor& ids, const std::vector<int64_t>& lengths) const;
  // The loss above, summed (Reduction::sum) or averaged (mean) over the labelled positions of
  // labels (B, T) i64 (-100: ignored).
  Tensor loss(const Tensor& logits, const Tensor& labels, bool sum = false) const;

  int64_t num_labels() const { return num_labels_; }

  std::shared_ptr<Bert> bert;
  std::shared_ptr<nn::Dropout> dropout;
  std::shared_ptr<nn::Linear> classifier;

 private:
  int64_t num_labels_;
};

}  // namespace qkv::models
