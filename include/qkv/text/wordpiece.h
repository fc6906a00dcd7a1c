// qkv/text/wordpiece.h - BERT's tokenizer: BasicTokenizer (clean text, CJK characters apart,
// white-space split, lower-case + strip accents when uncased, punctuation apart) then greedy
// longest-match-first WordPiece with "##" continuations (google-research/bert tokenization.py).
//
// Unicode behaviour follows Python's unicodedata (Unicode 14) and str.lower() exactly, so ids
// equal tools/text/bert_reference.py. Invalid UTF-8 bytes are dropped, like BERT's
// convert_to_unicode (errors="ignore").
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "qkv/text/tokenizer.h"

namespace qkv::text {

struct BertNormalizeOptions {
  bool clean_text = true;
  bool handle_chinese_chars = true;
  bool lowercase = true;
  bool strip_accents = true;  // BERT strips accents exactly when it lower-cases
};

// BERT's BasicTokenizer: the words WordPiece sees, as UTF-8.
std::vector<std::string> bert_basic_tokenize(std::string_view text, const BertNormalizeOptions& opt);
bool bert_is_chinese_char(uint32_t cp);  // the CJK ranges of BERT's _is_chinese_char
bool bert_is_punctuation(uint32_t cp);   // ASCII non-alphanumeric symbols or category P*

struct WordPieceOptions {
  std::string unk_token = "[UNK]";
  std::string continuing_subword_prefix = "##";
  int max_input_chars_per_word = 100;
  BertNormalizeOptions normalize;
};

class WordPieceTokenizer : public ListVocabTokenizer {
 public:
  WordPieceTokenizer(std::vector<std::string> vocab, WordPieceOptions opt);
  // vocab.txt (one token per line, line number = id); lower-cases when tokenizer_config.json
  // beside it says do_lower_case, else when no vocabulary token has an upper-case letter.
  // Registers BERT's special tokens and [CLS] A [SEP] (B [SEP]) template.
  static std::unique_ptr<WordPieceTokenizer> load_vocab_txt(const std::string& path);

  std::string kind() const override { return "wordpiece"; }
  const WordPieceOptions& options() const { return opt_; }

  void encode_model(std::string_view text, std::vector<int32_t>& out) const override;
  // Tokens joined by spaces, "##" pieces glued to the previous one, then Hugging Face's
  // clean-up of spaces before punctuation and contractions.
  std::string decode_model(std::span<const int32_t> ids) const override;
  bool decode_joins_with_space() const override { return true; }

  void wordpiece_word(std::string_view word, std::vector<int32_t>& out) const;

 private:
  WordPieceOptions opt_;
  int32_t unk_id_ = -1;
};

}  // namespace qkv::text
