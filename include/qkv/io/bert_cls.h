// qkv/io/bert_cls.h - a BERT sentence(-pair) classifier as a model directory in Hugging Face's
// BertForSequenceClassification layout (io/bert.h for the encoder):
//
//   config.json        BertConfig keys, "architectures": ["BertForSequenceClassification"],
//                      "id2label" {"0": name, ...}, "label2id" {name: 0, ...}, "classifier_dropout"
//                      (null: hidden_dropout_prob), and qkv's "qkv_classifier": {"pairs": bool,
//                      "max_len": n, "pooling": "pooler" | "mean"} (one text or two per input,
//                      where inputs were truncated, and how the sentence vector is made; "mean"
//                      is not Hugging Face's computation, so such a directory names no
//                      architecture)
//   model.safetensors  bert.* (the published BERT names), classifier.weight (C, D), classifier.bias (C)
//   tokenizer.json + vocab.txt (WordPiece, with [CLS] [SEP] [PAD])
// Errors name the file and the field or tensor.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "qkv/io/bert.h"
#include "qkv/models/bert_classifier.h"

namespace qkv::io {

struct BertClassifierBundle {
  std::shared_ptr<models::BertForSequenceClassification> model;
  std::vector<std::string> labels;             // id -> name; size = model->num_labels
  std::shared_ptr<text::Tokenizer> tokenizer;  // required: [CLS] a [SEP] (b [SEP])
  bool pairs = false;                          // inputs are (a, b) pairs
  bool pairs_declared = true;                  // false: config.json does not say (a directory transformers
                                               // wrote): single texts and pairs are both taken
  int64_t max_len = 0;                         // inputs truncated to this many tokens (<= max_position_embeddings)
  BertLoadReport report;                       // what loading did with each tensor
};

// What a new classifier head is: its labels, inputs and pooling.
struct BertClassifierSpec {
  std::vector<std::string> labels;  // >= 2 names: num_labels = labels.size()
  bool pairs = false;
  int64_t max_len = 0;              // 0 or more than max_position_embeddings: max_position_embeddings
  models::BertClsPooling pooling = models::BertClsPooling::pooler;
  double classifier_dropout = -1;   // < 0: hidden_dropout_prob (config.json's null)
};

// A fine-tuned classifier directory (as save_bert_classifier writes it, or transformers'
// BertForSequenceClassification.save_pretrained + the tokenizer): labels from id2label (a
// "num_labels" key must agree), the head from classifier.*; a missing head is an error. Without
// qkv_classifier.pairs the directory accepts single texts and pairs (pairs_declared false).
// precision bf16: every weight held in bf16 from the start (load_bert).
BertClassifierBundle load_bert_classifier(const std::string& dir,
                                          kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32);
// Any BERT directory (BertModel, BertForPreTraining: e.g. `qkv train`'s BERT pretraining output)
// as the start of fine-tuning: the encoder loaded, the classifier newly initialised (from the
// default generator) unless the file has one, other heads (cls.*) ignored: bundle.report says which.
BertClassifierBundle load_bert_for_classification(const std::string& dir, const BertClassifierSpec& spec);
// A fresh classifier with random weights (Hugging Face's initialisation).
BertClassifierBundle make_bert_classifier(const models::BertConfig& cfg, const BertClassifierSpec& spec,
                                          std::shared_ptr<text::Tokenizer> tokenizer);
// Writes config.json, model.safetensors, tokenizer.json and vocab.txt into dir, each atomically.
void save_bert_classifier(const std::string& dir, const BertClassifierBundle& bundle);

}  // namespace qkv::io
