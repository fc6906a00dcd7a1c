// qkv/io/labels.h - what a classifier's config.json says beyond its body's config, read strictly by
// every classifier loader (BERT sequence and token classifiers, the GPT classifier): the labels
// (Hugging Face's PretrainedConfig id2label) and qkv's own "qkv_classifier" section.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace qkv::io {

// id2label: keys "0" .. "C-1", each once, naming C >= min_labels distinct non-empty labels.
// Errors name `where` (the file) and the field; `what` says whose labels they are ("a token
// classifier").
std::vector<std::string> read_id2label(const nlohmann::json& config, const std::string& where, const char* what,
                                       size_t min_labels);

// problem_type (Hugging Face's), when given, must be "single_label_classification": qkv's sequence
// classifiers give one label per input, a softmax over the labels, where a multi-label model is
// read with a sigmoid per label and a regression one with none. Errors name `where` and the field.
void check_single_label(const nlohmann::json& config, const std::string& where);

// "qkv_classifier": how a sequence classifier reads its inputs. An object (or absent) whose keys
// are pairs (true: inputs are two texts), max_len (an integer: tokens per input, 0 = the position
// table's) and, where `pooling_allowed` (BERT), pooling (a string the caller parses); any other
// key or type is an error naming `where` and the field. The range of max_len is the caller's.
struct QkvClassifierSection {
  bool pairs = false, pairs_declared = false;
  int64_t max_len = 0;
  std::optional<std::string> pooling;
};
QkvClassifierSection read_qkv_classifier(const nlohmann::json& config, const std::string& where,
                                         bool pooling_allowed);

}  // namespace qkv::io
