// pairs-debian: one-line summaries paired with long descriptions (their own or a same-section one).
#include "qkv/data/corpus_pairs.h"

#include <chrono>
#include <filesystem>
#include <map>
#include <unordered_map>

#include "qkv/data/corpus.h"
#include "qkv/data/debian.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace qkv::data {

std::vector<SummaryPair> make_summary_pairs(const std::vector<PackageText>& p, const std::vector<int>& split,
                                            uint64_t seed) {
  QKV_CHECK(p.size() == split.size(), "make_summary_pairs", "one split per package expected, got ", split.size(),
            " for ", p.size());
  std::map<std::pair<int, std::string>, std::vector<size_t>> group;  // (split, section) -> packages in order
  for (size_t i = 0; i < p.size(); ++i) group[{split[i], p[i].section}].push_back(i);
  std::vector<SummaryPair> out;
  out.reserve(2 * p.size());
  uint64_t state = seed;
  for (size_t i = 0; i < p.size(); ++i) {
    out.push_back({true, i, i});
    const auto& g = group[{split[i], p[i].section}];
    const uint64_t start = splitmix64(state) % g.size();
    for (size_t k = 0; k < g.size(); ++k) {  // the first usable candidate from a seeded offset
      const size_t j = g[(start + k) % g.size()];
      if (p[j].source == p[i].source || p[j].description == p[i].description) continue;
      out.push_back({false, i, j});
      break;
    }
  }
  return out;
}

BuildResult build_summary_pairs_corpus(const ExtraBuildOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  BuildResult res;
  res.out_dir = opt.data_dir + "/cls/debian-summary-pairs";
  const double valid_frac = 0.1, test_frac = 0.1;
  const nlohmann::json key = {{"builder", "qkv pairs-debian corpus v1"},
                              {"indexes", description_indexes_key()},
                              {"valid_frac", valid_frac}, {"test_frac", test_frac}, {"seed", opt.seed}};
  const std::vector<std::string> outputs = {"train.tsv", "valid.tsv", "test.tsv", "stats.json"};
  if (reuse_build(res, key, outputs, opt.force)) return res;
  const DescriptionIndexes idx = fetch_description_indexes(opt.cache_dir, opt.verbose);
  const auto long_desc = long_descriptions(idx.translations);  // Description-md5 -> long text
  std::vector<PackageText> packages;
  std::vector<std::string> sources;
  uint64_t no_long = 0;
  for (auto& rec : parse_deb822(read_compressed(idx.packages))) {
    std::string section = rec["Section"];
    if (section.empty()) continue;
    if (size_t sl = section.rfind('/'); sl != std::string::npos) section.erase(0, sl + 1);
    const std::string source = source_package(rec);
    auto it = long_desc.find(rec["Description-md5"]);
    std::string summary = normalize_whitespace(to_utf8(rec["Description"]));
    if (it == long_desc.end() || it->second.empty() || summary.empty()) {
      ++no_long;
      continue;
    }
    packages.push_back({section, source, summary, normalize_whitespace(it->second)});
    sources.push_back(source);
  }
  auto split_of = split_groups(sources, valid_frac, test_frac, opt.seed);
  std::vector<int> split(packages.size());
  for (size_t i = 0; i < packages.size(); ++i) split[i] = int(split_of[packages[i].source]);
  const auto pairs = make_summary_pairs(packages, split, opt.seed);

  SplitTexts splits;
  std::map<std::string, uint64_t> classes[3];
  for (const auto& q : pairs) {
    const Split s = Split(split[q.summary_of]);
    const std::string label = q.match ? "yes" : "no";
    const std::string& a = packages[q.summary_of].summary;
    const std::string& b = packages[q.description_of].description;
    splits.add(s, label + "\t" + a + "\t" + b, a + " " + b);
    ++classes[int(s)][label];
  }
  fs::create_directories(res.out_dir);
  nlohmann::json stats = {{"name", "pairs-debian"}, {"packages", packages.size()}, {"examples", pairs.size()},
                          {"source_packages", split_of.size()}, {"without_long_description", no_long}};
  write_splits(res.out_dir, "tsv", splits, stats,
               [&](Split s, nlohmann::json& entry) { entry["classes"] = classes[int(s)]; });
  finish_build(res.out_dir, stats, key, t0);
  res.stats = stats;
  res.built = true;
  return res;
}

}  // namespace qkv::data
