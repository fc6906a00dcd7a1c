// lm-en: English documents (a package description, a dictionary entry, a gloss) from Debian
// descriptions and dictionaries: one paragraph per line, a blank line after each document; the
// train/valid/test split is by document, so no document straddles two splits.
#include <chrono>
#include <filesystem>
#include <unordered_set>

#include "qkv/data/corpus.h"
#include "qkv/data/corpus_mono.h"
#include "qkv/data/debian.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace qkv::data {
namespace {

constexpr size_t kMinTokens = 6;
const std::vector<std::string> kLmPackages = {"dict-gcide", "dict-foldoc", "dict-jargon", "wordnet-base"};

// Extracts the files of `deb` under `prefix` into dir (flat, by base name); returns base names.
void extract_to(const std::string& deb, const std::string& prefix, const std::string& dir) {
  fs::create_directories(dir);
  extract_deb_files(
      deb, [&](const std::string& p) { return p.rfind(prefix, 0) == 0; },
      [&](const std::string& p, std::string&& data) {
        write_file_atomic(dir + "/" + fs::path(p).filename().string(), data);
      });
}

}  // namespace

BuildResult build_lm_corpus(const ExtraBuildOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  BuildResult res;
  res.out_dir = opt.data_dir + "/lm/en";
  const nlohmann::json key = {{"builder", "qkv lm-en corpus v2 (documents)"}, {"packages", kLmPackages},
                              {"index", "bookworm main/i18n/Translation-en.xz"},
                              {"min_tokens", kMinTokens}, {"seed", opt.seed}};
  const std::vector<std::string> outputs = {"train.txt", "valid.txt", "test.txt", "stats.json"};
  if (reuse_build(res, key, outputs, opt.force)) return res;
  const std::string cache = opt.cache_dir.empty() ? default_cache_dir() : opt.cache_dir;
  const std::string tr = fetch_archive_index("main/i18n/Translation-en.xz", cache, "bookworm", opt.verbose);
  auto debs = fetch_debs(kLmPackages, cache + "/debs", opt.verbose);
  const std::string ex = cache + "/extracted";
  extract_to(debs.at("dict-gcide"), "usr/share/dictd/gcide.", ex + "/dict-gcide");
  extract_to(debs.at("dict-foldoc"), "usr/share/dictd/foldoc.", ex + "/dict-foldoc");
  extract_to(debs.at("dict-jargon"), "usr/share/dictd/jargon.", ex + "/dict-jargon");
  extract_to(debs.at("wordnet-base"), "usr/share/wordnet/data.", ex + "/wordnet-base");

  // A document is the paragraphs of one description, dictionary entry or gloss that survive the
  // filters (at least kMinTokens tokens, some letters, not seen before in any source).
  std::unordered_set<std::string> seen;
  std::vector<std::vector<std::string>> docs;
  nlohmann::json sources;
  auto add = [&](const std::string& source, std::vector<std::vector<std::string>>&& ds) {
    uint64_t lines = 0, tokens = 0, candidates = 0, documents = 0;
    for (auto& d : ds) {
      std::vector<std::string> kept;
      for (auto& p : d) {
        ++candidates;
        size_t nt = count_tokens(p);
        if (nt < kMinTokens || !has_words(p) || !seen.insert(p).second) continue;
        ++lines;
        tokens += nt;
        kept.push_back(std::move(p));
      }
      if (kept.empty()) continue;
      ++documents;
      docs.push_back(std::move(kept));
    }
    sources[source] = {{"candidates", candidates}, {"documents", documents}, {"lines", lines}, {"tokens", tokens}};
  };

  {
    std::vector<std::vector<std::string>> ds;
    for (auto& rec : parse_deb822(read_compressed(tr))) {
      const std::string& d = rec["Description-en"];
      size_t nl = d.find('\n');
      if (nl == std::string::npos) continue;
      std::vector<std::string> ps;
      for (auto& p : description_paragraphs(std::string_view(d).substr(nl + 1))) ps.push_back(to_utf8(p));
      ds.push_back(std::move(ps));
    }
    add("debian-descriptions", std::move(ds));
  }
  for (const char* name : {"gcide", "foldoc", "jargon"}) {
    const std::string dir = ex + "/dict-" + std::string(name);
    const std::string dict = read_compressed(dir + "/" + name + ".dict.dz");
    std::vector<std::vector<std::string>> ds;
    for (const auto& e : dictd_entries(read_file(dir + "/" + name + ".index"), dict)) ds.push_back(dictd_paragraphs(e));
    add(name, std::move(ds));
  }
  {
    std::vector<std::vector<std::string>> ds;
    for (const char* pos : {"noun", "verb", "adj", "adv"})
      for (auto& g : wordnet_glosses(read_file(ex + "/wordnet-base/data." + pos))) ds.push_back({std::move(g)});
    add("wordnet", std::move(ds));
  }

  // Document-level split by a seeded hash of the document's text: 1% test, 1% valid. Each
  // document is its paragraphs, one per line, then a blank line.
  SplitTexts splits;
  for (const auto& d : docs) {
    std::string text;
    for (const auto& p : d) text += p + "\n";
    uint64_t h = group_key(text, opt.seed) % 1000;
    splits.add(h < 10 ? Split::Test : h < 20 ? Split::Valid : Split::Train, text, text);
  }
  fs::create_directories(res.out_dir);
  nlohmann::json stats = {{"name", "lm-en"}, {"sources", sources}, {"packages", kLmPackages},
                          {"translation_index", tr}};
  stats["documents"] = write_splits(res.out_dir, "txt", splits, stats);
  finish_build(res.out_dir, stats, key, t0);
  res.stats = stats;
  res.built = true;
  return res;
}

}  // namespace qkv::data
