// qkv/models/bert_classifier.h - BERT for sentence (and sentence-pair) classification, as Hugging
// Face's BertForSequenceClassification (Devlin et al. 2019, 4.1):
//
//   pooled = tanh(W_p h_L[:, 0] + b_p)              the Bert's pooler over [CLS]      (B, D)
//   logits = W_c Dropout(pooled) + b_c              "classifier" Linear(D, C)         (B, C)
//
// Dropout's rate is classifier_dropout, or hidden_dropout_prob when that is unset (HF's rule).
// Names: bert.* (the Bert), classifier.{weight, bias}; io/bert_cls.h reads and writes the layout.
//
// Pooling::mean is qkv's variant for the encoder trained from scratch (the Keras tutorial's
// "text classification with Transformer": global average pooling, dropout, dense): pooled is the
// average of h_L over the non-padding tokens ([CLS] and [SEP] included) and the pooler is unused.
#pragma once
#include <memory>
#include <string>

#include "qkv/models/bert.h"

namespace qkv::models {

enum class BertClsPooling { pooler, mean };
BertClsPooling parse_bert_cls_pooling(const std::string& name);  // "pooler" | "mean"; else throws naming it
const char* bert_cls_pooling_name(BertClsPooling p);

class BertForSequenceClassification : public nn::Module {
 public:
  // bert: e.g. loaded by io::load_bert; head: a Linear(D, num_labels) with bias to use as the
  // classifier (e.g. loaded with the encoder), or null: one drawn as Hugging Face initialises it
  // (weight N(0, 0.02), bias 0) from gen. dropout < 0: hidden_dropout_prob.
  BertForSequenceClassification(std::shared_ptr<Bert> bert, int64_t num_labels, double dropout = -1,
                                BertClsPooling pooling = BertClsPooling::pooler,
                                std::shared_ptr<nn::Linear> head = nullptr, Generator& gen = default_generator());
  // ids, token_type_ids, key_pad as Bert::forward -> logits (B, C).
  Tensor forward(const Tensor& ids, const Tensor& token_type_ids = {}, const Tensor& key_pad = {}) const;
  // The sentence vector the classifier reads (before dropout): (B, D).
  Tensor pooled(const Tensor& ids, const Tensor& token_type_ids = {}, const Tensor& key_pad = {}) const;
  // The same for B rows packed end to end without padding (Bert::hidden_packed's arguments): (B, C), (B, D).
  Tensor forward_packed(const Tensor& ids, const Tensor& token_type_ids, const std::vector<int64_t>& lengths) const;
  Tensor pooled_packed(const Tensor& ids, const Tensor& token_type_ids, const std::vector<int64_t>& lengths) const;

  std::shared_ptr<Bert> bert;
  std::shared_ptr<nn::Dropout> dropout;
  std::shared_ptr<nn::Linear> classifier;  // (C, D) + (C)
  int64_t num_labels;
  BertClsPooling pooling;
};

}  // namespace qkv::models
