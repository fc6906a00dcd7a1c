// Parallel-corpus construction on a generated miniature archive (tools/text/make_mini_corpus.py):
// every entry's designed outcome, then the written corpus re-derived and recounted in Python
// (tools/text/check_mt_corpus.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "scratch_util.h"
#include "qkv/data/corpus.h"
#include "qkv/data/corpus_mt.h"
#include "qkv/util/error.h"

using namespace qkv::data;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct MiniCorpus : ::testing::Test {
  static inline std::string dir;
  static inline json expected;
  static void SetUpTestSuite() {
    dir = qkv_test::scratch_dir("mini_corpus");
    ASSERT_EQ(qkv_test::run_shell(qkv_test::python() + " " + qkv_test::tool("make_mini_corpus.py") +
                                  " " + dir + "/archive"),
              0);
    expected = json::parse(qkv::read_file(dir + "/archive/expected.json"));
  }
  static std::vector<MtCatalogSource> catalogs() {
    std::vector<MtCatalogSource> out;
    for (auto& [pkg, _] : expected["packages"].items())
      out.push_back({pkg, "1.0", pkg + ".mo", read_mo(dir + "/archive/" + pkg + "/" + pkg + ".mo")});
    return out;
  }
};

}  // namespace

TEST_F(MiniCorpus, EveryEntryHasItsDesignedOutcome) {
  size_t checked = 0;
  for (const auto& src : catalogs()) {
    const json& want = expected["packages"][src.package];
    for (const auto& e : src.catalog.entries) {
      MtEntryResult r = clean_mt_entry(e);
      if (e.msgid.empty()) {
        EXPECT_EQ(r.reason, "header");
        continue;
      }
      const json* w = nullptr;
      for (const auto& x : want)
        if (x["id"] == e.msgid && (x["ctx"].is_null() ? "" : x["ctx"].get<std::string>()) == e.context)
          w = &x;
      ASSERT_NE(w, nullptr) << "entry not in the design: " << e.msgid;
      if (w->contains("keep")) {
        EXPECT_TRUE(r.keep) << e.msgid << " dropped as " << r.reason;
        EXPECT_EQ(r.en, (*w)["keep"][0].get<std::string>());
        EXPECT_EQ(r.tgt, (*w)["keep"][1].get<std::string>());
      } else {
        EXPECT_FALSE(r.keep) << e.msgid << " kept as '" << r.en << "'";
        EXPECT_EQ(r.reason, (*w)["drop"].get<std::string>()) << e.msgid;
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 35u);
}

TEST_F(MiniCorpus, WrittenCorpusMatchesIndependentRecount) {
  MtCorpusConfig cfg;
  cfg.valid_frac = cfg.test_frac = 0.125;  // 1 of 8 packages each
  const std::string out = dir + "/out";
  json st = write_mt_corpus(catalogs(), cfg, out);
  EXPECT_EQ(st["splits"]["valid"]["packages"].size(), 1u);
  EXPECT_EQ(st["splits"]["test"]["packages"].size(), 1u);
  EXPECT_EQ(qkv_test::run_shell(qkv_test::python() + " " + qkv_test::tool("check_mt_corpus.py") + " " +
                                out + " " + dir + "/archive/expected.json"),
            0)
      << "see check_mt_corpus output above";
  // Deterministic: a second write gives identical files. A stamp found there (an earlier build's)
  // is removed before the first file is written: the caller stamps the finished build.
  fs::create_directories(dir + "/out2");
  write_stamp(dir + "/out2", {{"builder", "earlier"}});
  write_mt_corpus(catalogs(), cfg, dir + "/out2");
  EXPECT_FALSE(std::filesystem::exists(dir + "/out2/stamp.json"));
  for (const char* f : {"train.tsv", "valid.tsv", "test.tsv", "packages.tsv"})
    EXPECT_EQ(qkv::read_file(out + "/" + f), qkv::read_file(dir + "/out2/" + f)) << f;
}

TEST_F(MiniCorpus, SeedChangesPackageSplitOnly) {
  MtCorpusConfig a, b;
  a.valid_frac = a.test_frac = b.valid_frac = b.test_frac = 0.25;
  b.seed = a.seed + 1;
  json sa = write_mt_corpus(catalogs(), a, dir + "/seed_a");
  json sb = write_mt_corpus(catalogs(), b, dir + "/seed_b");
  EXPECT_EQ(sa["splits"]["test"]["packages"].size(), 2u);
  EXPECT_EQ(sa["entries"], sb["entries"]);
  EXPECT_EQ(sa["dropped"], sb["dropped"]);
  for (const char* d : {"/seed_a", "/seed_b"})
    EXPECT_EQ(qkv_test::run_shell(qkv_test::python() + " " + qkv_test::tool("check_mt_corpus.py") + " " +
                                  dir + d + " " + dir + "/archive/expected.json"),
              0);
}

TEST(MtClean, AcceleratorsAndIdentifiers) {
  EXPECT_EQ(strip_accelerators("_Open", "Ö_ffnen"), std::make_pair(std::string("Open"), std::string("Öffnen")));
  EXPECT_EQ(strip_accelerators("E&xit", "&Beenden"), std::make_pair(std::string("Exit"), std::string("Beenden")));
  // identifiers present on both sides stay
  EXPECT_EQ(strip_accelerators("set max_size", "max_size setzen").first, "set max_size");
  // two underscores: not an accelerator
  EXPECT_EQ(strip_accelerators("_NET_WM_NAME missing", "_NET_WM_NAME fehlt").first, "_NET_WM_NAME missing");
  // a trailing or doubled marker is left alone
  EXPECT_EQ(strip_accelerators("Save_", "Speichern_").first, "Save_");
  EXPECT_EQ(strip_accelerators("Tom && Jerry", "Tom && Jerry").first, "Tom && Jerry");
}

TEST(MtClean, ReadParallelTsvRejectsBadRows) {
  const std::string d = qkv_test::scratch_dir("tsv_bad");
  qkv::write_file_atomic(d + "/ok.tsv", "a b\tc d\ne\tf\n");
  auto rows = read_parallel_tsv(d + "/ok.tsv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].second, "c d");
  qkv::write_file_atomic(d + "/bad.tsv", "a\tb\nno tab here\n");
  try {
    read_parallel_tsv(d + "/bad.tsv");
    FAIL() << "no error";
  } catch (const qkv::Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.tsv"), std::string::npos) << e.what();
  }
}
