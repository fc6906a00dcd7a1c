// qkv/io/bert_tagger.h - BERT token-classification directories in Hugging Face's
// BertForTokenClassification layout, both ways:
//
//   config.json        BertConfig keys (io/bert.h) + "architectures": ["BertForTokenClassification"],
//                      "id2label": {"0": "O", "1": "B-PKG", ...}, "label2id": the inverse, and
//                      optionally "classifier_dropout" (null: hidden_dropout_prob, as Hugging Face)
//   model.safetensors  bert.* as io/bert.h names them, without bert.pooler.* (the class builds none),
//                      and classifier.{weight (C, D), bias (C)}
//   tokenizer.json (+ vocab.txt for WordPiece)
//
// load_bert_tagger reads such a directory: id2label and the classifier must be there. A directory
// of any other BERT (BertForPreTraining, BertModel) starts a tagger through
// bert_tagger_from_pretrained: the encoder is loaded, the classifier newly initialised, and the
// report says so (pooler and cls.* ignored).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "qkv/io/bert.h"
#include "qkv/models/bert_tagger.h"

namespace qkv::io {

struct BertTaggerBundle {
  models::BertConfig config;
  std::vector<std::string> labels;  // label id -> name (id2label)
  std::shared_ptr<models::BertForTokenClassification> model;
  std::shared_ptr<text::Tokenizer> tokenizer;  // null when the directory has none
  BertLoadReport report;
};

// A new tagger with random weights (Hugging Face's initialisation) for these labels.
BertTaggerBundle make_bert_tagger(const models::BertConfig& cfg, std::vector<std::string> labels,
                                  Generator& gen = default_generator());
// The encoder of any BERT directory (io::load_bert without pooler and heads) under a new classifier.
BertTaggerBundle bert_tagger_from_pretrained(const std::string& dir, std::vector<std::string> labels);
// A BertForTokenClassification directory (errors name the file and the key or tensor).
// precision bf16 / int8: the weights held so (load_bert's; the classifier held after it is read).
BertTaggerBundle load_bert_tagger(const std::string& dir,
                                  kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32);
// Writes config.json, model.safetensors and the tokenizer files into dir, each atomically.
void save_bert_tagger(const std::string& dir, const BertTaggerBundle& bundle);

// The parameters under their published names (bert.* and classifier.*): the tensors themselves.
std::map<std::string, Tensor> bert_tagger_published_parameters(const BertTaggerBundle& b);

}  // namespace qkv::io
