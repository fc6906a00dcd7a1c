// build_mt_corpus: package list -> cached .debs -> catalogs -> write_mt_corpus, with a stamp.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "qkv/data/corpus.h"
#include "qkv/data/corpus_mt.h"
#include "qkv/data/debian.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace qkv::data {
namespace {

// Catalogs of one language from one .deb. Catalogs in a charset other than UTF-8/ASCII/Latin-1
// are skipped (counted by the caller); Latin-1 msgstrs are converted.
std::vector<MtCatalogSource> catalogs_of(const std::string& package, const std::string& deb,
                                         const std::string& lang, uint64_t& skipped_charset) {
  const std::string prefix = "usr/share/locale/" + lang + "/LC_MESSAGES/";
  std::vector<MtCatalogSource> out;
  const std::string version = deb_version(deb);
  extract_deb_files(
      deb,
      [&](const std::string& p) {
        return p.rfind(prefix, 0) == 0 && p.size() > 3 && p.compare(p.size() - 3, 3, ".mo") == 0;
      },
      [&](const std::string& p, std::string&& data) {
        MoCatalog cat = parse_mo(data, deb + ":" + p);
        const std::string cs = cat.charset();
        if (cs == "iso-8859-1" || cs == "latin1" || cs == "iso8859-1") {
          for (auto& e : cat.entries)
            for (auto& s : e.msgstr) s = latin1_to_utf8(s);
        } else if (!(cs.empty() || cs == "utf-8" || cs == "utf8" || cs == "ascii" ||
                     cs == "us-ascii" || cs == "charset")) {
          ++skipped_charset;  // "charset" = the unfilled template value; content is ASCII
          return;
        }
        out.push_back({package, version, p, std::move(cat)});
      });
  std::sort(out.begin(), out.end(),
            [](const MtCatalogSource& a, const MtCatalogSource& b) { return a.file < b.file; });
  return out;
}

// The stats of a complete corpus in out_dir that an explicit package list built, if there is one.
std::optional<nlohmann::json> explicit_list_corpus(const std::string& out_dir, const std::vector<std::string>& files) {
  namespace fs = std::filesystem;
  if (!fs::exists(out_dir + "/stamp.json")) return std::nullopt;
  for (const auto& f : files)
    if (!fs::exists(out_dir + "/" + f)) return std::nullopt;
  try {
    nlohmann::json stats = nlohmann::json::parse(read_file(out_dir + "/stats.json"));
    if (stats.value("explicit_package_list", false)) return stats;
  } catch (const std::exception&) {
  }
  return std::nullopt;  // unreadable stats: rebuild
}

}  // namespace

BuildResult build_mt_corpus(const MtBuildOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string lang = opt.tgt_lang;
  const std::string list_path =
      opt.package_list.empty() ? find_corpus_list("en-" + lang + "." + opt.set + ".txt") : opt.package_list;
  const std::vector<std::string> packages = read_package_list(list_path);
  QKV_CHECK(!packages.empty(), "build_mt_corpus", "package list '", list_path, "' is empty");
  BuildResult res;
  res.out_dir = opt.data_dir + "/mt/en-" + lang + "-" + opt.set;
  const auto& c = opt.config;
  nlohmann::json key = {{"builder", "qkv mt corpus v1"},
                        {"tgt_lang", lang},
                        {"packages", packages},
                        {"valid_frac", c.valid_frac},
                        {"test_frac", c.test_frac},
                        {"seed", c.seed},
                        {"max_bytes", c.filter.max_bytes},
                        {"max_len_ratio", c.filter.max_len_ratio}};
  const std::vector<std::string> outputs = {"train.tsv", "valid.tsv", "test.tsv", "stats.json",
                                            "packages.tsv"};
  if (reuse_build(res, key, outputs, opt.force)) return res;
  if (!opt.force && opt.keep_explicit_list && opt.package_list.empty()) {
    if (auto kept = explicit_list_corpus(res.out_dir, outputs)) {
      res.stats = std::move(*kept);
      if (opt.verbose)
        std::fprintf(stderr, "qkv: using %s as built from the package list %s (%llu pairs); `qkv data` without "
                     "--list rebuilds it from %s\n", res.out_dir.c_str(),
                     res.stats.value("package_list", std::string("?")).c_str(),
                     (unsigned long long)res.stats.value("pairs", 0ull), list_path.c_str());
      return res;
    }
  }
  const std::string cache = opt.cache_dir.empty() ? default_cache_dir() : opt.cache_dir;
  auto debs = fetch_debs(packages, cache + "/debs", opt.verbose);
  const auto t_fetched = std::chrono::steady_clock::now();

  // Extract and parse in parallel (dpkg-deb + xz/zstd dominate); results keep list order.
  std::vector<std::vector<MtCatalogSource>> per_pkg(packages.size());
  std::vector<std::exception_ptr> errors(packages.size());
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> skipped_charset{0};
  auto worker = [&] {
    for (size_t i; (i = next++) < packages.size();) {
      try {
        uint64_t skipped = 0;
        per_pkg[i] = catalogs_of(packages[i], debs.at(packages[i]), lang, skipped);
        skipped_charset += skipped;
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  const unsigned n_threads = std::max(1u, std::min(4u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < n_threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);

  std::vector<MtCatalogSource> all;
  std::vector<std::string> without;
  for (size_t i = 0; i < packages.size(); ++i) {
    if (per_pkg[i].empty()) without.push_back(packages[i]);
    for (auto& cs : per_pkg[i]) all.push_back(std::move(cs));
  }
  MtCorpusConfig cfg = opt.config;
  cfg.tgt_lang = lang;  // MtBuildOptions::tgt_lang decides the language
  res.stats = write_mt_corpus(all, cfg, res.out_dir);
  const auto t1 = std::chrono::steady_clock::now();
  res.stats["name"] = "en-" + lang + "-" + opt.set;
  res.stats["package_list"] = list_path;
  res.stats["explicit_package_list"] = !opt.package_list.empty();
  res.stats["packages_without_catalog"] = without;
  res.stats["catalogs_skipped_charset"] = skipped_charset.load();
  res.stats["seconds_fetch"] = std::chrono::duration<double>(t_fetched - t0).count();
  res.stats["seconds_total"] = std::chrono::duration<double>(t1 - t0).count();
  write_file_atomic(res.out_dir + "/stats.json", res.stats.dump(2) + "\n");
  write_stamp(res.out_dir, key);
  res.built = true;
  return res;
}

}  // namespace qkv::data
