// qkv/io/labels.h - a classifier's labels from config.json's id2label (Hugging Face's
// PretrainedConfig field), read strictly by every classifier loader (BERT sequence and token
// classifiers, the GPT classifier).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace qkv::io {

// id2label: keys "0" .. "C-1", each once, naming C >= min_labels distinct non-empty labels.
// Errors name `where` (the file) and the field; `what` says whose labels they are ("a token
// classifier").
std::vector<std::string> read_id2label(const nlohmann::json& config, const std::string& where, const char* what,
                                       size_t min_labels);

}  // namespace qkv::io
