// qkv/data/corpus.h - pieces shared by the corpus builders: text clean-up, whitespace token
// statistics, deterministic hashing for splits, and the build stamp that makes builds idempotent.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <unordered_map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qkv/util/hash.h"  // splitmix64, fnv1a64

namespace qkv::data {

// ---- text clean-up (UTF-8 validity: qkv/util/utf8.h) ----
// Interprets bytes as ISO-8859-1 and returns UTF-8.
std::string latin1_to_utf8(std::string_view s);
// Valid UTF-8 is returned as is; anything else is read as ISO-8859-1 (the usual legacy encoding
// of Debian text files).
std::string to_utf8(std::string_view s);
// Replaces every run of ASCII whitespace (space, \t, \n, \r, \f, \v) and U+00A0 by one space and
// trims both ends. Other control characters (< 0x20, 0x7f) become spaces too.
std::string normalize_whitespace(std::string_view s);
// True if s holds at least one letter (ASCII letter or any non-ASCII code point) after removing
// printf/Python/brace format codes, markup tags and entities.
bool has_words(std::string_view s);
// Number of whitespace-separated tokens.
size_t count_tokens(std::string_view s);

// ---- statistics ----
// Counts lines, whitespace tokens and token types over one text column.
struct TextStats {
  uint64_t lines = 0, tokens = 0;
  std::unordered_map<std::string, uint64_t> types;  // token -> count
  void add(std::string_view line);
  nlohmann::json to_json() const;         // {"lines", "tokens", "types"}
};

// ---- deterministic choices ----
// A stable pseudo-random key for a group name (package, source package) under a seed.
uint64_t group_key(std::string_view name, uint64_t seed);

enum class Split { Train, Valid, Test };
const char* split_name(Split s);
// Assigns whole groups to splits: groups sorted by group_key; the first round(test_frac*G)
// (at least 1 if G >= 3) go to test, the next round(valid_frac*G) (same rule) to valid.
std::map<std::string, Split> split_groups(const std::vector<std::string>& groups,
                                          double valid_frac, double test_frac, uint64_t seed);

// ---- idempotent builds ----
// A build writes <out_dir>/stamp.json last, holding `key` (a JSON of everything the output
// depends on). is_up_to_date() is true when the stamp matches and every listed file exists.
bool is_up_to_date(const std::string& out_dir, const nlohmann::json& key,
                   const std::vector<std::string>& files);
void write_stamp(const std::string& out_dir, const nlohmann::json& key);
// A build's first write: removes <out_dir>/stamp.json, so that a build stopped partway (killed, a
// full disk) leaves no stamp matching the files of two builds.
void remove_stamp(const std::string& out_dir);
// A builder's first step: true (and res.stats read from its stats.json) when res.out_dir holds a
// finished build of `key` with every file and the build is not forced; the builder returns res.
// A stats.json that does not parse counts as no build.
struct BuildResult;
bool reuse_build(BuildResult& res, const nlohmann::json& key, const std::vector<std::string>& files, bool force);

// ---- the end of every corpus build ----
// The three splits' text and statistics, indexed by int(Split).
struct SplitTexts {
  std::string text[3];
  TextStats stats[3];
  void add(Split s, std::string_view line_text, std::string_view counted) {  // counted: the text column
    text[int(s)] += line_text;
    text[int(s)] += '\n';
    stats[int(s)].add(counted);
  }
};
// ---- labelled sentences (classification corpora) ----
// Collects (label, text) items: a text seen again with the same label is a duplicate (dropped),
// with another label a conflict (every copy dropped). by_class() lists the kept texts per label
// in input order.
class LabelledTexts {
 public:
  explicit LabelledTexts(int num_labels) : num_labels_(num_labels) {}
  void add(int label, const std::string& text);  // label in [0, num_labels)
  std::vector<std::vector<std::string>> by_class() const;
  uint64_t duplicates() const { return duplicates_; }
  uint64_t conflicting() const;  // distinct texts dropped for contradicting labels

 private:
  int num_labels_;
  std::vector<std::pair<int, std::string>> items_;  // first occurrences
  std::unordered_map<std::string, int> label_of_;    // text -> label, -1 once contradicted
  uint64_t duplicates_ = 0;
};
// Stratified seeded split: per label in order, a Fisher-Yates shuffle driven by splitmix64 (one
// state through all labels, starting at seed), then the first round(test_frac * n) texts to
// test, the next round(valid_frac * n) to valid, the rest to train; lines "label\ttext".
// classes[split][label] counts them.
void stratified_split(std::vector<std::vector<std::string>> by_class, double valid_frac, double test_frac,
                      uint64_t seed, SplitTexts& out, std::map<std::string, uint64_t> (&classes)[3]);

// Removes the stamp (remove_stamp), writes <out_dir>/{train,valid,test}.<ext>, fills
// stats["splits"][name] with {"examples", "text"} plus what `extra` adds for that split, and
// returns the number of examples of all splits.
uint64_t write_splits(const std::string& out_dir, const std::string& ext, const SplitTexts& splits,
                      nlohmann::json& stats, const std::function<void(Split, nlohmann::json&)>& extra = {});
// Adds stats["seconds_total"] (since t0), writes stats.json, then the stamp (last: a build
// interrupted before it is redone).
void finish_build(const std::string& out_dir, nlohmann::json& stats, const nlohmann::json& key,
                  std::chrono::steady_clock::time_point t0);

}  // namespace qkv::data
