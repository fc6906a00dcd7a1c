// src/tasks/translation_setup.h - the pieces a translation training run assembles (private to
// tasks/translation_training.cpp): corpus files, tokenizers, model vocabulary sizes, encoded pairs.
#pragma once
#include <initializer_list>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qkv/io/model_dir.h"
#include "qkv/text/bpe_train.h"
#include "qkv/train/seq2seq_stream.h"

namespace qkv::tasks {

struct ParallelText {
  std::vector<std::string> src, tgt;
};
// Reads "source\ttarget" lines; errors name the file and line.
ParallelText read_parallel_tsv(const std::string& path);

// Resolves a corpus name ("en-de-small", "en-fr-large") to <data_dir>/mt/<name>/, building it
// from Debian packages first if needed. Returns the directory.
std::string ensure_mt_corpus(const std::string& name, const std::string& data_dir);

// Reads and removes "protect" (a boolean, default false) from the "tokenizer" section; `where`
// names the config file in errors.
bool take_protect_flag(nlohmann::json& tokenizer_cfg, const std::string& where);
// Puts each pair's shared spans behind placeholders (text::protect_pair), in place.
void protect_pairs(ParallelText& text);

// How a run learns its BPE tokenizer(s), read from the "tokenizer" config section ({"kind":
// "bpe"|"bytebpe", "vocab_size", "min_frequency", "shared"}) before anything is learned; `where`
// names the config file in errors.
struct TokenizerPlan {
  text::BpeTrainOptions bpe = {};
  bool shared = true;  // one tokenizer for both sides
};
TokenizerPlan read_tokenizer_plan(const nlohmann::json& cfg, const std::string& where);
// The keys of that section that describe learning a tokenizer (unused when one is given).
inline constexpr std::initializer_list<const char*> kTokenizerPlanKeys = {"kind", "vocab_size", "min_frequency",
                                                                          "shared"};
// Trains the planned tokenizer(s) from the training text, with their input files in work_dir.
void train_tokenizers(const TokenizerPlan& plan, const ParallelText& train, const std::string& work_dir,
                      std::shared_ptr<text::Tokenizer>& src_tok, std::shared_ptr<text::Tokenizer>& tgt_tok);

// Fills vocabulary sizes and special ids from the tokenizers into config["model"].
void complete_model_config(nlohmann::json& config, const text::Tokenizer& src_tok, const text::Tokenizer& tgt_tok);

// Tokenizes pairs; drops those longer than max_len tokens on either side (returns the count).
std::vector<train::Example> encode_pairs(const ParallelText& text, const text::Tokenizer& src_tok,
                                         const text::Tokenizer& tgt_tok, int64_t eos, int64_t max_len,
                                         int64_t* dropped = nullptr);

}  // namespace qkv::tasks
