// cls-debian: package descriptions labelled with their Section; splits grouped by source package.
#include <chrono>
#include <filesystem>
#include <unordered_map>

#include "qkv/data/corpus.h"
#include "qkv/data/corpus_mono.h"
#include "qkv/data/debian.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace qkv::data {

BuildResult build_cls_corpus(const ExtraBuildOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  BuildResult res;
  res.out_dir = opt.data_dir + "/cls/debian-sections";
  const double valid_frac = 0.1, test_frac = 0.1;
  const nlohmann::json key = {{"builder", "qkv cls-debian corpus v1"},
                              {"indexes", description_indexes_key()},
                              {"valid_frac", valid_frac}, {"test_frac", test_frac}, {"seed", opt.seed}};
  const std::vector<std::string> outputs = {"train.tsv", "valid.tsv", "test.tsv", "stats.json"};
  if (reuse_build(res, key, outputs, opt.force)) return res;
  const DescriptionIndexes idx = fetch_description_indexes(opt.cache_dir, opt.verbose);
  const auto long_desc = long_descriptions(idx.translations);  // Description-md5 -> long text

  struct Example {
    std::string label, source, text;
  };
  std::vector<Example> ex;
  std::vector<std::string> sources;
  uint64_t no_long = 0;
  for (auto& rec : parse_deb822(read_compressed(idx.packages))) {
    std::string section = rec["Section"];
    if (section.empty()) continue;
    if (size_t sl = section.rfind('/'); sl != std::string::npos) section.erase(0, sl + 1);
    const std::string source = source_package(rec);
    std::string text = normalize_whitespace(to_utf8(rec["Description"]));
    auto it = long_desc.find(rec["Description-md5"]);
    if (it != long_desc.end() && !it->second.empty()) text += " " + it->second;
    else ++no_long;
    ex.push_back({section, source, text});
    sources.push_back(source);
  }
  auto split_of = split_groups(sources, valid_frac, test_frac, opt.seed);
  SplitTexts splits;
  std::map<std::string, uint64_t> classes[3], all_classes;
  for (const auto& e : ex) {
    Split s = split_of[e.source];
    splits.add(s, e.label + "\t" + e.text, e.text);
    ++classes[int(s)][e.label];
    ++all_classes[e.label];
  }
  fs::create_directories(res.out_dir);
  nlohmann::json stats = {{"name", "cls-debian"}, {"examples", ex.size()}, {"source_packages", split_of.size()},
                          {"without_long_description", no_long}, {"classes", all_classes.size()}};
  write_splits(res.out_dir, "tsv", splits, stats, [&](Split s, nlohmann::json& entry) {
    uint64_t n_src = 0;
    for (auto& [src, sp] : split_of) n_src += sp == s;
    entry["source_packages"] = n_src;
    entry["classes"] = classes[int(s)];
  });
  finish_build(res.out_dir, stats, key, t0);
  res.stats = stats;
  res.built = true;
  return res;
}

}  // namespace qkv::data
