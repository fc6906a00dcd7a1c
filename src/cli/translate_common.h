// src/cli/translate_common.h - batch translation shared by `qkv translate` and training's
// validation: sorts sentences by length, decodes in batches, returns outputs in input order.
#pragma once
#include <string>
#include <vector>

#include "qkv/decode/search.h"
#include "qkv/io/model_dir.h"
#include "qkv/train/seq2seq_data.h"

namespace qkv::cli {

struct TranslateRequest {
  decode::Options options;
  int64_t batch_size = 32;    // sentences per batch
  bool refuse_long = false;   // a line longer than the model allows: error (else truncate + warn)
  bool quiet = false;         // no truncation warnings
};

struct TranslateResult {
  std::vector<std::string> text;                     // best hypothesis per input line
  std::vector<std::vector<decode::Hypothesis>> hyps;  // n-best per line
  std::vector<std::vector<int64_t>> src_ids;          // encoded sources (for attention plots)
  int64_t truncated = 0;
};

TranslateResult translate_lines(io::Seq2SeqBundle& bundle, const std::vector<std::string>& lines,
                                const TranslateRequest& req);

// <pad>/<s>/</s> ids of a bundle's target tokenizer (and the model config's fallbacks).
train::SeqIds special_ids(const io::Seq2SeqBundle& bundle);

}  // namespace qkv::cli

namespace qkv::cli {
// Cross-attention heatmaps (one panel per layer and head, plus their average) of input line
// `line` (1-based) and its translation, drawn to `png`.
void write_attention_png(io::Seq2SeqBundle& bundle, const TranslateResult& r, const std::vector<std::string>& lines,
                         int64_t line, const std::string& png);
}  // namespace qkv::cli
