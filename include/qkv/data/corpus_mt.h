// qkv/data/corpus_mt.h - English-X parallel corpus from the gettext catalogs of Debian packages.
//
//   corpora/en-<lang>.<set>.txt --apt-get download--> <cache>/debs/*.deb
//     --dpkg-deb--> usr/share/locale/<lang>/LC_MESSAGES/*.mo --parse_mo--> (msgid, msgstr)
//     --clean/filter--> split by package --dedup, drop held-out pairs seen in train-->
//   <data>/mt/en-<lang>-<set>/{train,valid,test}.tsv ("en\t<lang>" per line), stats.json,
//   packages.tsv, stamp.json
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qkv/data/mo.h"

namespace qkv::data {

struct MtFilterOptions {
  size_t max_bytes = 400;      // drop entries longer than this (UTF-8 bytes, either side)
  double max_len_ratio = 3.0;  // drop if one side is > ratio x longer (both sides >= 10 bytes)
};

// One catalog entry cleaned into a pair, or the reason it was dropped ("plural", "header",
// "empty", "encoding", "credits", "no_words", "too_long", "identical", "length_ratio").
struct MtEntryResult {
  bool keep = false;
  std::string en, tgt;
  std::string reason;
};
MtEntryResult clean_mt_entry(const MoEntry& e, const MtFilterOptions& opt = {});

// Removes keyboard accelerator markers ('_' or '&' before a letter or digit, GTK/Qt style) from
// both sides. A side's marker is removed only if it is that side's only '_' (resp. '&', not
// counting entities like &amp;), and the whitespace token holding it does not occur verbatim
// on the other side (which would make it an identifier such as file_name or AT&T).
std::pair<std::string, std::string> strip_accelerators(std::string_view en, std::string_view tgt);

// A parsed catalog and where it came from.
struct MtCatalogSource {
  std::string package, version, file;  // file: path inside the .deb
  MoCatalog catalog;
};

struct MtCorpusConfig {
  std::string tgt_lang = "de";
  double valid_frac = 0.05, test_frac = 0.05;  // fractions of packages held out
  uint64_t seed = 20240521;
  MtFilterOptions filter;
};

// Cleans, splits by package, deduplicates and writes train/valid/test.tsv, packages.tsv and
// stats.json into out_dir. Returns the statistics written to stats.json.
nlohmann::json write_mt_corpus(const std::vector<MtCatalogSource>& catalogs,
                               const MtCorpusConfig& cfg, const std::string& out_dir);

struct MtBuildOptions {
  std::string tgt_lang = "de";
  std::string set = "small";     // package list corpora/en-<lang>.<set>.txt
  std::string package_list;      // explicit list file (overrides set lookup)
  std::string data_dir = "data";
  std::string cache_dir;         // "" = default_cache_dir()
  bool verbose = false;          // progress on stderr
  bool force = false;            // rebuild even if the stamp matches
  // With no package_list: keep a corpus that an explicit list built in the directory (`qkv data
  // --list`) instead of rebuilding it from the set's list. Training's --corpus NAME sets it: the
  // user's corpus is the one meant, and rebuilding would silently replace it.
  bool keep_explicit_list = false;
  MtCorpusConfig config;
};

struct BuildResult {
  bool built = false;            // false: the stamp matched, nothing was done
  std::string out_dir;
  nlohmann::json stats;          // contents of stats.json
};

// Builds <data_dir>/mt/en-<lang>-<set>. Idempotent: if stamp.json matches the package list and
// options, returns at once without touching apt (works offline). Downloads missing .debs only.
BuildResult build_mt_corpus(const MtBuildOptions& opt);

// Locates corpora/<file> in the current directory or next to the running program's source tree
// (walking up from /proc/self/exe); throws qkv::Error listing the places tried.
std::string find_corpus_list(const std::string& file);

// Reads a two-column TSV written by write_mt_corpus into (src, tgt) pairs.
std::vector<std::pair<std::string, std::string>> read_parallel_tsv(const std::string& path);

}  // namespace qkv::data
