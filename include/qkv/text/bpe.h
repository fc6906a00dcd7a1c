// qkv/text/bpe.h - BPE encoding with learned merges (Sennrich et al. 2016): byte-level (GPT-2:
// GPT-2 pattern pre-tokeniser, bytes_to_unicode symbols) or word-level (whitespace words, the
// last character of a word carries the end-of-word suffix "</w>").
//
// Encoding a pre-token: start from its symbols, repeatedly merge the adjacent pair of lowest
// merge rank (all its occurrences, left to right) until no pair is a merge. Results are cached
// per pre-token (thread-safe), which is what makes encoding fast on real text.
#pragma once
#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "qkv/text/tokenizer.h"

namespace qkv::text {

struct BpeOptions {
  bool byte_level = true;           // GPT-2 style; false: word-level
  std::string end_of_word_suffix;   // "</w>" for word-level BPE, "" for byte-level
  std::string unk_token;            // word-level: token for characters outside the vocabulary
  // Reproduce gpt-3-encoder's lookup of merges by the string "left,right": a pair whose joined
  // key equals another merge's key gets that merge's rank (11 "ghost" pairs in GPT-2's merges,
  // all around ',' and '"'). Off by default: OpenAI's encoder.py and Hugging Face have no ghosts.
  bool js_comma_key_quirk = false;
};

class BpeTokenizer : public ListVocabTokenizer {
 public:
  using Merge = std::pair<std::string, std::string>;
  // vocab[id] = token (byte-level tokens are in bytes_to_unicode form, e.g. "Ġthe"); merges in
  // rank order. Every merge's parts and result must be in the vocabulary.
  BpeTokenizer(std::vector<std::string> vocab, std::vector<Merge> merges, BpeOptions opt);

  // GPT-2 from OpenAI's encoder.json + vocab.bpe; registers <|endoftext|> (bos/eos/unk).
  static std::unique_ptr<BpeTokenizer> load_gpt2(const std::string& encoder_json,
                                                 const std::string& vocab_bpe,
                                                 bool js_comma_key_quirk = false);

  std::string kind() const override { return opt_.byte_level ? "bytebpe" : "bpe"; }
  const BpeOptions& options() const { return opt_; }
  const std::vector<Merge>& merges() const { return merges_; }

  void encode_model(std::string_view text, std::vector<int32_t>& out) const override;
  std::string decode_model(std::span<const int32_t> ids) const override;
  bool decode_joins_with_space() const override { return !opt_.byte_level; }

  // Symbols of one pre-token after all merges (no cache).
  void bpe_word(std::string_view word, std::vector<int32_t>& out) const;
  // The merge loop over symbols w in place, two ways with one result (bpe_merge.cpp): rescanning
  // every adjacent pair per merge, O(length x merges applied), fast on the short pre-tokens of real
  // text; and a priority queue of pairs, O(n log n), for long ones (a 200,000-letter pre-token took
  // 3 s by rescanning). bpe_word takes the scan up to 128 symbols.
  void merge_by_scan(std::vector<int32_t>& w) const;
  void merge_by_queue(std::vector<int32_t>& w) const;

 private:
  struct MergeInfo {
    int32_t rank, result;
  };
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  void encode_word_cached(std::string_view word, std::vector<int32_t>& out) const;
  void initial_symbols(std::string_view word, std::vector<int32_t>& syms) const;

  BpeOptions opt_;
  std::vector<Merge> merges_;
  std::unordered_map<uint64_t, MergeInfo> merge_of_;
  std::array<int32_t, 256> byte_id_{};  // byte-level: id of each byte's symbol
  std::vector<std::string> id_bytes_;   // byte-level: raw bytes of each token
  int32_t unk_id_ = -1;
  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace qkv::text
