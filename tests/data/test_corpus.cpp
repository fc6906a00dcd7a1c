// Corpus helpers: UTF-8 checks, whitespace, word detection, splits, stamps, and the parsers of
// Debian indexes, dictd databases and WordNet, on hand-made inputs with hand-worked results.
#include <gtest/gtest.h>

#include <filesystem>

#include "scratch_util.h"
#include "qkv/data/corpus.h"
#include "qkv/data/corpus_mono.h"
#include "qkv/data/debian.h"
#include "qkv/util/error.h"
#include "qkv/util/utf8.h"

using namespace qkv::data;

TEST(CorpusText, Utf8Validation) {
  EXPECT_TRUE(qkv::utf8::is_valid("plain ascii"));
  EXPECT_TRUE(qkv::utf8::is_valid("Grüße 日本語 🙂"));
  EXPECT_FALSE(qkv::utf8::is_valid("\xc3"));              // truncated
  EXPECT_FALSE(qkv::utf8::is_valid("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(qkv::utf8::is_valid("\xed\xa0\x80"));      // surrogate U+D800
  EXPECT_FALSE(qkv::utf8::is_valid("\xf4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(qkv::utf8::is_valid("caf\xe9"));           // Latin-1 é
  EXPECT_EQ(latin1_to_utf8("caf\xe9"), "café");
  EXPECT_EQ(to_utf8("caf\xe9"), "café");
  EXPECT_EQ(to_utf8("café"), "café");
}

TEST(CorpusText, WhitespaceAndTokens) {
  EXPECT_EQ(normalize_whitespace("  a \t b\r\n\nc  "), "a b c");
  EXPECT_EQ(normalize_whitespace("x\xc2\xa0y"), "x y");  // no-break space
  EXPECT_EQ(normalize_whitespace("a\x01" "b"), "a b");
  EXPECT_EQ(normalize_whitespace(""), "");
  EXPECT_EQ(count_tokens(" one  two\tthree\n"), 3u);
  EXPECT_EQ(count_tokens("   "), 0u);
}

TEST(CorpusText, HasWords) {
  EXPECT_TRUE(has_words("Open %s now"));
  EXPECT_FALSE(has_words("%s: %d"));
  EXPECT_FALSE(has_words("%1$s (%2$lu)"));
  EXPECT_FALSE(has_words("%(name)s %-10.3f %%"));
  EXPECT_FALSE(has_words("<b>%s</b>"));
  EXPECT_FALSE(has_words("{0} ${HOME} &amp; &#39;"));
  EXPECT_FALSE(has_words("… → ©"));
  EXPECT_FALSE(has_words("x"));  // one letter is not a word
  EXPECT_TRUE(has_words("日本"));
  EXPECT_TRUE(has_words("Größe"));
}

TEST(CorpusSplit, GroupsAreWholeAndDeterministic) {
  std::vector<std::string> g;
  for (int i = 0; i < 100; ++i) g.push_back("pkg" + std::to_string(i));
  auto a = split_groups(g, 0.1, 0.05, 7), b = split_groups(g, 0.1, 0.05, 7), c = split_groups(g, 0.1, 0.05, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  size_t n[3] = {0, 0, 0};
  for (auto& [k, s] : a) ++n[int(s)];
  EXPECT_EQ(n[0], 85u);
  EXPECT_EQ(n[1], 10u);
  EXPECT_EQ(n[2], 5u);
  // Duplicated names count once; small sets still get one held-out group each.
  auto small = split_groups({"x", "y", "z", "x"}, 0.05, 0.05, 1);
  EXPECT_EQ(small.size(), 3u);
  size_t m[3] = {0, 0, 0};
  for (auto& [k, s] : small) ++m[int(s)];
  EXPECT_EQ(m[0], 1u);
  EXPECT_EQ(m[1], 1u);
  EXPECT_EQ(m[2], 1u);
  EXPECT_THROW(split_groups({"a", "b"}, 0.5, 0.5, 1), qkv::Error);
}

TEST(CorpusSplit, Splitmix64KnownValues) {  // qkv/util/hash.h, used by the splits
  // Reference values of splitmix64 seeded with 0 (Vigna's splitmix64.c, first outputs).
  uint64_t s = 0;
  EXPECT_EQ(qkv::splitmix64(s), 0xe220a8397b1dcdafull);
  EXPECT_EQ(qkv::splitmix64(s), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(qkv::splitmix64(s), 0x06c45d188009454full);
  // FNV-1a 64 of "a" (published test vector).
  EXPECT_EQ(qkv::fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(qkv::fnv1a64(""), 0xcbf29ce484222325ull);
}

TEST(CorpusStamp, MatchesOnlySameKeyAndFiles) {
  const std::string d = qkv_test::scratch_dir("stamp");
  nlohmann::json key = {{"a", 1}};
  EXPECT_FALSE(is_up_to_date(d, key, {}));
  write_stamp(d, key);
  EXPECT_TRUE(is_up_to_date(d, key, {}));
  EXPECT_FALSE(is_up_to_date(d, {{"a", 2}}, {}));
  EXPECT_FALSE(is_up_to_date(d, key, {"missing.tsv"}));
  qkv::write_file_atomic(d + "/stamp.json", "{broken");
  EXPECT_FALSE(is_up_to_date(d, key, {}));
}

// A rebuild that stops partway (here: valid.tsv cannot be written) has already removed the old
// build's stamp, so the next run with the old key rebuilds rather than taking a mix of two builds.
TEST(CorpusStamp, AnInterruptedRebuildLeavesNoStamp) {
  const std::string d = qkv_test::scratch_dir("stamp_interrupted");
  const nlohmann::json key = {{"builder", "test"}};
  SplitTexts splits;
  splits.add(Split::Train, "a\tb", "a");
  nlohmann::json stats;
  write_splits(d, "tsv", splits, stats);
  finish_build(d, stats, key, std::chrono::steady_clock::now());
  ASSERT_TRUE(is_up_to_date(d, key, {"train.tsv", "valid.tsv", "test.tsv", "stats.json"}));
  std::filesystem::remove(d + "/valid.tsv");
  std::filesystem::create_directory(d + "/valid.tsv");  // the rebuild's second write fails
  splits.add(Split::Train, "c\td", "c");
  EXPECT_THROW(write_splits(d, "tsv", splits, stats), qkv::Error);
  std::filesystem::remove(d + "/valid.tsv");
  qkv::write_file_atomic(d + "/valid.tsv", "");
  EXPECT_FALSE(std::filesystem::exists(d + "/stamp.json"));
  EXPECT_FALSE(is_up_to_date(d, key, {"train.tsv", "valid.tsv", "test.tsv", "stats.json"}));
}

// reuse_build: the stamped build's stats when it is up to date and not forced; a build again when
// forced, when the key differs, or when stats.json is damaged.
TEST(CorpusStamp, ReuseBuildReadsTheStatsOfAnUpToDateBuild) {
  BuildResult res;
  res.out_dir = qkv_test::scratch_dir("reuse");
  const nlohmann::json key = {{"builder", "test"}};
  EXPECT_FALSE(reuse_build(res, key, {"stats.json"}, false));  // nothing built yet
  qkv::write_file_atomic(res.out_dir + "/stats.json", R"({"pairs": 7})");
  write_stamp(res.out_dir, key);
  EXPECT_TRUE(reuse_build(res, key, {"stats.json"}, false));
  EXPECT_EQ(res.stats, nlohmann::json({{"pairs", 7}}));
  EXPECT_FALSE(reuse_build(res, key, {"stats.json"}, true));
  EXPECT_FALSE(reuse_build(res, {{"builder", "other"}}, {"stats.json"}, false));
  qkv::write_file_atomic(res.out_dir + "/stats.json", R"({"pairs": )");
  EXPECT_FALSE(reuse_build(res, key, {"stats.json"}, false));
}

TEST(CorpusParsers, Deb822AndDescriptions) {
  const std::string text =
      "Package: foo\nSource: foo-src (1.2)\nSection: utils\nDescription-en: short one\n"
      " First paragraph line one\n line two.\n .\n Second paragraph:\n  verbatim line\n"
      " * bullet item\n\nPackage: bar\nSection: contrib/net\n";
  auto recs = parse_deb822(text);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0]["Package"], "foo");
  EXPECT_EQ(recs[0]["Source"], "foo-src (1.2)");
  EXPECT_EQ(recs[1]["Section"], "contrib/net");
  const std::string& d = recs[0]["Description-en"];
  ASSERT_EQ(d.substr(0, 10), "short one\n");
  auto ps = description_paragraphs(std::string_view(d).substr(10));
  ASSERT_EQ(ps.size(), 4u);
  EXPECT_EQ(ps[0], "First paragraph line one line two.");
  EXPECT_EQ(ps[1], "Second paragraph:");
  EXPECT_EQ(ps[2], "verbatim line");
  EXPECT_EQ(ps[3], "* bullet item");
}

TEST(CorpusParsers, Dictd) {
  EXPECT_EQ(dictd_b64("A"), 0u);
  EXPECT_EQ(dictd_b64("B"), 1u);
  EXPECT_EQ(dictd_b64("BA"), 64u);
  EXPECT_EQ(dictd_b64("/"), 63u);
  EXPECT_THROW(dictd_b64("*"), qkv::Error);
  // Two entries; "hash" and "hashing" share one span; metadata entry skipped.
  const std::string dict = "meta\nhash\n  A {function} that maps\n  keys.\n\n  Second para.\nzed\n  Last.\n";
  // spans (worked out by hand): meta [0,5) = A,F; hash [5,59) = F,2; zed [59,71) = 7,M
  const std::string index = "00-database-info\tA\tF\nhash\tF\t2\nhashing\tF\t2\nzed\t7\tM\n";
  auto es = dictd_entries(index, dict);
  ASSERT_EQ(es.size(), 2u);
  EXPECT_EQ(es[0], dict.substr(5, 54));
  EXPECT_EQ(es[1], "zed\n  Last.\n");
  auto ps = dictd_paragraphs(es[0]);
  ASSERT_EQ(ps.size(), 2u);
  EXPECT_EQ(ps[0], "A function that maps keys.");
  EXPECT_EQ(ps[1], "Second para.");
  EXPECT_THROW(dictd_entries("x\tA\t/////\n", dict), qkv::Error);  // past the end
  EXPECT_THROW(dictd_entries("x\tA\n", dict), qkv::Error);         // missing field
}

TEST(CorpusParsers, WordnetGlosses) {
  const std::string data =
      "  1 This software and database is being provided\n"
      "00001740 03 n 01 entity 0 003 ~ 00001930 n 0000 | that which is perceived to exist\n"
      "00002137 03 n 02 abstraction 0 | a general concept formed by extracting common features\n"
      "no gloss line\n";
  auto g = wordnet_glosses(data);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0], "that which is perceived to exist");
}

TEST(CorpusDebian, PackageListParsing) {
  const std::string d = qkv_test::scratch_dir("pkglist");
  qkv::write_file_atomic(d + "/l.txt", "# comment\ncoreutils  # inline\n\n  tar\r\nlibc++1\n");
  EXPECT_EQ(read_package_list(d + "/l.txt"), (std::vector<std::string>{"coreutils", "tar", "libc++1"}));
  qkv::write_file_atomic(d + "/bad.txt", "ok\nnot a name\n");
  EXPECT_THROW(read_package_list(d + "/bad.txt"), qkv::Error);
  // The repository's lists parse and are non-trivial.
  for (const char* f : {"en-de.small.txt", "en-fr.small.txt", "en-de.large.txt", "en-fr.large.txt"}) {
    auto l = read_package_list(std::string(QKV_SOURCE_DIR) + "/corpora/" + f);
    EXPECT_GE(l.size(), 10u) << f;
  }
}

TEST(CorpusParsers, SourcePackageIsTheSourceNameElseThePackage) {
  EXPECT_EQ(source_package({{"Package", "libfoo1"}, {"Source", "foo (1.2-3)"}}), "foo");
  EXPECT_EQ(source_package({{"Package", "libfoo1"}, {"Source", "foo"}}), "foo");
  EXPECT_EQ(source_package({{"Package", "bar"}}), "bar");
  EXPECT_EQ(source_package({}), "");
}
