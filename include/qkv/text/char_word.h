// qkv/text/char_word.h - character-level and word-level (white-space) tokenizers with a
// vocabulary built from a corpus: special tokens first, then tokens by descending count (ties in
// byte-wise order), keeping those seen at least min_frequency times, up to max_size in total.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "qkv/text/tokenizer.h"

namespace qkv::text {

struct VocabBuildOptions {
  int64_t min_frequency = 1;
  int max_size = 0;  // 0: no limit
  std::vector<std::string> special_tokens = {"<pad>", "<unk>", "<s>", "</s>"};
  std::string unk_token = "<unk>";  // must be one of special_tokens
};

class VocabTokenizer : public ListVocabTokenizer {
 public:
  enum class Level { Char, Word };
  VocabTokenizer(Level level, std::vector<std::string> vocab, std::string unk_token);

  // Counts characters (UTF-8 code points; an invalid byte counts as itself) or white-space words.
  static std::unique_ptr<VocabTokenizer> build(Level level, const std::vector<std::string>& files,
                                               const VocabBuildOptions& opt);
  static std::unique_ptr<VocabTokenizer> build_from_text(Level level, std::string_view text,
                                                         const VocabBuildOptions& opt);

  std::string kind() const override { return level_ == Level::Char ? "char" : "word"; }
  Level level() const { return level_; }
  const std::string& unk_token() const { return unk_; }

  void encode_model(std::string_view text, std::vector<int32_t>& out) const override;
  // Char: concatenation; word: tokens joined by single spaces.
  std::string decode_model(std::span<const int32_t> ids) const override;
  bool decode_joins_with_space() const override { return level_ == Level::Word; }

 private:
  Level level_;
  std::string unk_;
  int32_t unk_id_ = -1;
};

}  // namespace qkv::text
