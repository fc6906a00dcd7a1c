// qkv/io/bert_qa.h - BertForQuestionAnswering directories in Hugging Face's layout, both ways:
// io/bert.h's encoder tensors (bert.embeddings.*, bert.encoder.*; no pooler) plus
// qa_outputs.{weight, bias} (2, hidden_size) / (2), config.json with
// "architectures": ["BertForQuestionAnswering"], and the tokenizer files.
//
// Loading any BERT directory works: a pretrained BertForPreTraining or BertModel directory
// reports qa_outputs.* newly initialised and its pooler and cls.* heads ignored; a QA
// directory loads everything. Errors are io/bert.h's, and a qa_outputs tensor of the wrong
// shape names the file and the tensor.
#pragma once
#include <memory>
#include <string>

#include "qkv/io/bert.h"
#include "qkv/models/bert_qa.h"

namespace qkv::io {

struct BertQaBundle {
  models::BertConfig config;
  std::shared_ptr<models::BertForQuestionAnswering> model;
  std::shared_ptr<text::Tokenizer> tokenizer;  // null when the directory has none
  BertLoadReport report;
};

// A new model with Hugging Face's initialisation drawn from gen.
BertQaBundle make_bert_qa(const models::BertConfig& cfg, Generator& gen = default_generator());
// precision bf16 / int8: the weights held so (load_bert's; qa_outputs held after it is read).
BertQaBundle load_bert_qa(const std::string& dir, kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32);
// config.json, model.safetensors, tokenizer.json (+ vocab.txt for WordPiece), each atomically.
void save_bert_qa(const std::string& dir, const BertQaBundle& b);
// The model's parameters by published name (bert.* without the pooler, qa_outputs.*).
std::map<std::string, Tensor> bert_qa_published_parameters(const BertQaBundle& b);

}  // namespace qkv::io
