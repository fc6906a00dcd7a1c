// qkv/io/gpt2_cls.h - a GPT fine-tuned for classification as a model directory in Hugging Face's
// GPT2ForSequenceClassification layout:
//
//   config.json        GPT2Config keys (models::GptConfig), "architectures":
//                      ["GPT2ForSequenceClassification"], "id2label" {"0": name, ...},
//                      "label2id" {name: 0, ...}, "pad_token_id" (Hugging Face reads the last
//                      non-pad token, which is [EXTRACT] under right padding), and qkv's
//                      "qkv_classifier": {"pairs": bool, "max_len": n} (what the model was
//                      trained on: one text or two per input, and where inputs were truncated)
//   model.safetensors  transformer.wte.weight, transformer.h.{i}..., (as io/gpt2.h, with the
//                      "transformer." prefix), score.weight (C, D)
//   tokenizer.json     with [START] / [DELIM] / [EXTRACT] as added tokens and their template
// Errors name the file and the field or tensor.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "qkv/models/gpt.h"
#include "qkv/text/tokenizer.h"

namespace qkv::io {

struct GptClassifierBundle {
  std::shared_ptr<models::GptClassifier> model;
  std::vector<std::string> labels;             // id -> name; size = model->num_labels
  std::shared_ptr<text::Tokenizer> tokenizer;  // required: the model's input needs its tokens
  bool pairs = false;                          // inputs are (a, b) pairs
  int64_t max_len = 0;                         // inputs truncated to this many tokens (0 = n_positions)
};

// precision bf16 / int8: every weight held in bf16 / int8 from the start (io::read_gpt2_body).
GptClassifierBundle load_gpt2_classifier(const std::string& dir,
                                         kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32);
// Writes config.json, model.safetensors and tokenizer.json into dir, each atomically.
void save_gpt2_classifier(const std::string& dir, const GptClassifierBundle& bundle);

}  // namespace qkv::io
