// qkv/text/bpe_train.h - learning BPE merges from a corpus (Sennrich et al. 2016).
//
// Words (pre-tokens) are counted once; then each step merges the most frequent adjacent symbol
// pair. Pair counts are kept incrementally with a pair -> words index and a max-heap with lazy
// deletion, so a step only touches the words that contain the merged pair.
// Tie-breaking (deterministic): the highest count wins; among equal counts the pair whose
// (left, right) token strings are smallest in byte-wise lexicographic order wins.
// Vocabulary order: special tokens, then the initial alphabet sorted byte-wise, then one token
// per merge in merge order.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "qkv/text/bpe.h"

namespace qkv::text {

struct BpeTrainOptions {
  int vocab_size = 8000;     // target size including specials and alphabet
  int64_t min_frequency = 2; // stop when the best pair occurs fewer times than this
  bool byte_level = false;   // GPT-2 pattern + bytes alphabet (all 256); else whitespace words
  std::string end_of_word_suffix = "</w>";  // word-level only
  std::vector<std::string> special_tokens = {"<pad>", "<unk>", "<s>", "</s>"};
  std::string unk_token = "<unk>";  // word-level: must be one of special_tokens (or empty)
};

// Counts pre-tokens of text, streaming (call add() per chunk that ends at a line boundary).
class WordCounter {
 public:
  explicit WordCounter(bool byte_level) : byte_level_(byte_level) {}
  void add(std::string_view text);
  void add_file(const std::string& path);  // reads in 16 MB blocks cut at line ends
  const std::unordered_map<std::string, int64_t>& counts() const { return counts_; }

 private:
  bool byte_level_;
  std::unordered_map<std::string, int64_t> counts_;
};

struct BpeTrainResult {
  std::vector<std::string> vocab;  // id -> token
  std::vector<BpeTokenizer::Merge> merges;
};

BpeTrainResult learn_bpe(const std::unordered_map<std::string, int64_t>& word_counts,
                         const BpeTrainOptions& opt);

// Counts the files, learns the merges, returns a ready tokenizer (specials registered; roles
// from the token names: <pad> [PAD] -> pad, <unk> [UNK] -> unk, <s> -> bos, </s> -> eos, ...).
std::unique_ptr<BpeTokenizer> train_bpe(const std::vector<std::string>& files, const BpeTrainOptions& opt);

// Guesses the role of a well-known special token name ("[CLS]" -> Cls ...); false if none.
bool guess_role(std::string_view token, Role& role);

}  // namespace qkv::text
