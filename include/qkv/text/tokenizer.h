// qkv/text/tokenizer.h - the common tokenizer interface and load_tokenizer().
//
//   auto tok = qkv::text::load_tokenizer("models/gpt2");   // tokenizer.json | vocab.txt | dir
//   std::vector<int32_t> ids = tok->encode("Hello world");  // no special tokens added
//   Encoding e = tok->encode_pair("question", "context");    // template: ids + type_ids
//   std::string s = tok->decode(ids);
//
// encode() first splits the text on the registered special ("added") tokens, like Hugging Face:
// "[CLS] a [MASK]" yields the [CLS] and [MASK] ids, and the model encodes the text in between.
// Tokenizers are immutable after configuration; encode/decode are thread-safe.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "qkv/text/special_tokens.h"

namespace qkv::text {

struct Encoding {
  std::vector<int32_t> ids;
  std::vector<int32_t> type_ids;      // segment ids (0 for A, 1 for B in BERT)
  std::vector<uint8_t> special_mask;  // 1 where the template inserted a special token
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // "bpe" (word-level, </w>), "bytebpe" (GPT-2), "wordpiece", "char", "word".
  virtual std::string kind() const = 0;

  std::vector<int32_t> encode(std::string_view text) const;
  // Applies the single/pair template (no template: just the ids, type 0 / 1).
  Encoding encode_single(std::string_view a, bool add_special_tokens = true) const;
  Encoding encode_pair(std::string_view a, std::string_view b, bool add_special_tokens = true) const;
  // skip_special drops the registered special tokens from the output.
  std::string decode(std::span<const int32_t> ids, bool skip_special = true) const;

  int32_t vocab_size() const;  // model vocabulary plus special tokens outside it
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::string id_to_token(int32_t id) const;  // throws for an id out of range

  // Special tokens: roles (pad/unk/cls/...) and the ids of their tokens.
  const SpecialTokens& special_tokens() const { return specials_; }
  std::optional<int32_t> special_id(Role r) const;
  int32_t require_special_id(Role r) const;  // throws naming the role if unset
  bool is_special_id(int32_t id) const { return special_by_id_.count(id) != 0; }
  // Registers `token` for `role` (an id in the model vocabulary, or a new id after it).
  void set_special(Role r, const std::string& token);
  void set_special_tokens(const SpecialTokens& s);
  void set_template(const PostTemplate& t);  // registers the template's tokens as specials
  const PostTemplate& post_template() const { return template_; }
  // Added tokens in id order (content, id): what tokenizer.json lists as added_tokens.
  std::vector<std::pair<std::string, int32_t>> added_tokens() const;
  void add_special_token(const std::string& token);  // no role, e.g. [unused0] or <|im_start|>

  void save(const std::string& path) const;  // Hugging Face tokenizer.json

  // The file the tokenizer was read from, or empty (built in memory). Errors that only encoding
  // can find (a word-level BPE without unk_token meeting a character outside its vocabulary) name
  // it, so the user learns which tokenizer lacks the character.
  const std::string& source() const { return source_; }
  void set_source(std::string path) { source_ = std::move(path); }

  // Model-level interface implemented by each tokenizer (no special-token handling).
  virtual void encode_model(std::string_view text, std::vector<int32_t>& out) const = 0;
  virtual std::string decode_model(std::span<const int32_t> ids) const = 0;
  virtual int32_t model_vocab_size() const = 0;
  virtual std::optional<int32_t> model_token_to_id(std::string_view token) const = 0;
  virtual std::string model_id_to_token(int32_t id) const = 0;
  // True where decoded pieces are separated by spaces (word, WordPiece, word-level BPE).
  virtual bool decode_joins_with_space() const { return false; }

 private:
  std::string source_;
  SpecialTokens specials_;
  PostTemplate template_;
  std::unordered_map<std::string, int32_t> special_by_token_;
  std::unordered_map<int32_t, std::string> special_by_id_;
  std::vector<std::string> special_longest_first_;
  void apply_template(const std::vector<TemplatePiece>& t, const std::vector<int32_t>* seqs,
                      Encoding& out) const;
};

// Cuts the token ids of a pair (or of one text: b empty) to at most `budget` ids together, one
// id at a time from the end of the longer sequence, a tie cutting b: transformers'
// "longest_first". Returns true if anything was cut.
bool truncate_longest_first(std::vector<int32_t>& a, std::vector<int32_t>& b, int64_t budget);

// Loads a tokenizer from a tokenizer.json, a BERT vocab.txt (uncased basic tokenizer, BERT
// specials and template), or a directory with tokenizer.json, or encoder.json + vocab.bpe
// (GPT-2), or vocab.txt. Errors name the file and the field.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

// A tokenizer whose model vocabulary is a list of token strings (id = index) with its reverse
// index: BPE, WordPiece and the char/word tokenizers. A token listed twice is an error naming
// `where` and both ids.
class ListVocabTokenizer : public Tokenizer {
 public:
  const std::vector<std::string>& vocab() const { return vocab_; }
  int32_t model_vocab_size() const override { return int32_t(vocab_.size()); }
  std::optional<int32_t> model_token_to_id(std::string_view token) const override;
  std::string model_id_to_token(int32_t id) const override { return vocab_.at(size_t(id)); }

 protected:
  ListVocabTokenizer(std::vector<std::string> vocab, const char* where);
  std::vector<std::string> vocab_;
  std::unordered_map<std::string, int32_t> token_id_;
};

}  // namespace qkv::text
