// qkv/data/corpus_mono.h - the English monolingual corpora:
//   lm-en       language modelling: Debian long descriptions (Translation-en), GCIDE, WordNet
//               glosses, FOLDOC, Jargon File; UTF-8, one paragraph per line, a blank line after
//               each document (a description, an entry, a gloss); split by document
//               -> <data>/lm/en/{train,valid,test}.txt
//   cls-debian  package descriptions labelled with their archive Section, splits grouped by
//               source package -> <data>/cls/debian-sections/{train,valid,test}.tsv ("label\ttext")
//   sentiment   the Amazon/IMDB/Yelp sentences shipped as fixtures by npm `sentiment`,
//               stratified seeded splits -> <data>/cls/sentiment/{train,valid,test}.tsv
//   pang-lee-reviews, pang-lee-sentences
//               Pang & Lee's movie-review polarity data (whole reviews; sentences) as Debian's
//               python3-pattern ships samples of it, stratified seeded splits
//               -> <data>/cls/pang-lee-{reviews,sentences}/{train,valid,test}.tsv
//   conll2010   CoNLL-2010 shared task 1's Wikipedia sentences, certain (1) or uncertain (0: hedged,
//               speculative), as python3-pattern ships a balanced sample, stratified seeded splits
//               -> <data>/cls/conll2010/{train,valid,test}.tsv
// Each build writes stats.json and a stamp; a second run does nothing (and needs no network).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "qkv/data/corpus_mt.h"  // BuildResult

namespace qkv::data {

struct ExtraBuildOptions {
  std::string data_dir = "data";
  std::string cache_dir;  // "" = default_cache_dir()
  uint64_t seed = 20240521;
  bool force = false, verbose = false;
};

BuildResult build_lm_corpus(const ExtraBuildOptions& opt);
BuildResult build_cls_corpus(const ExtraBuildOptions& opt);
BuildResult build_sentiment_corpus(const ExtraBuildOptions& opt);
enum class PangLee { reviews, sentences };
BuildResult build_pang_lee_corpus(const ExtraBuildOptions& opt, PangLee which);
BuildResult build_conll2010_corpus(const ExtraBuildOptions& opt);

// ---- parsers used by the builders (exposed for tests) ----

// Records of a deb822 file (Packages, Translation-en): field -> value; continuation lines are
// kept, joined with "\n" (their leading space included).
std::vector<std::map<std::string, std::string>> parse_deb822(std::string_view text);
// A Packages record's source package: the name in Source (without a "(version)"), else Package.
std::string source_package(const std::map<std::string, std::string>& rec);

// Paragraphs of a Debian long description (the continuation lines of Description):
// " ." separates paragraphs; a line indented by two or more spaces, or a bullet (" * ", " - ",
// " o "), starts a new one. Each paragraph is whitespace-normalised.
std::vector<std::string> description_paragraphs(std::string_view long_description);

// The long descriptions of a compressed Translation-en index: Description-md5 -> its paragraphs
// (description_paragraphs) joined by single spaces, as UTF-8 (what cls-debian and pairs-debian read).
std::unordered_map<std::string, std::string> long_descriptions(const std::string& translation_index);

// The two archive indexes that cls-debian and pairs-debian read (bookworm main: the amd64
// Packages and Translation-en), fetched into the cache (idempotent, locked): their paths, and the
// "indexes" entry that names them in a build's stamp key.
struct DescriptionIndexes {
  std::string packages, translations;  // compressed index files
};
DescriptionIndexes fetch_description_indexes(const std::string& cache_dir, bool verbose);
nlohmann::json description_indexes_key();

// Entries of a dictd database: the .index ("word\t<b64 offset>\t<b64 length>") and the
// decompressed .dict. Returns each distinct entry's text, in offset order, skipping the
// 00-database-* metadata entries.
std::vector<std::string> dictd_entries(std::string_view index, std::string_view dict);
// Decodes dictd's base64 numbers ("A".."/" = 0..63, most significant digit first).
uint64_t dictd_b64(std::string_view s);
// Paragraphs of a dictd entry: drops the head line, splits at blank lines, removes {braces}
// of cross references, normalises whitespace.
std::vector<std::string> dictd_paragraphs(std::string_view entry);

// Records of a CSV text (RFC 4180: "quoted" fields may hold commas and line breaks, "" is a
// quote; a leading UTF-8 byte-order mark is skipped; \n or \r\n ends a record; blank lines are
// skipped). An unclosed quote or text after a closing quote is an error naming `where` and the line.
std::vector<std::vector<std::string>> parse_csv(std::string_view text, const std::string& where);

// Glosses of a WordNet data.* file (the text after " | " on each synset line).
std::vector<std::string> wordnet_glosses(std::string_view data_file);

}  // namespace qkv::data
