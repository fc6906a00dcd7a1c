// The CSV reader, and the corpora built from Debian's python3-pattern's labelled CSV files (Pang &
// Lee's polarity sets, CoNLL-2010's uncertainty sentences), checked by an independent reading with
// Python's csv module (tools/text/check_cls_corpus.py).
#include <gtest/gtest.h>

#include <filesystem>

#include "qkv/data/corpus_mono.h"
#include "qkv/data/debian.h"
#include "qkv/util/error.h"
#include "scratch_util.h"

using namespace qkv::data;

TEST(Csv, QuotedFieldsLineBreaksEscapesAndBom) {
  // RFC 4180 examples: a quoted field with a comma, a line break and "" for a quote.
  auto rows = parse_csv("\xEF\xBB\xBF\"1\",\"a, b\"\r\n\"-1\",\"two\nlines \"\"quoted\"\"\"\nplain,field\n\n", "t.csv");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"1", "a, b"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{"-1", "two\nlines \"quoted\""}));
  EXPECT_EQ(rows[2], (std::vector<std::string>{"plain", "field"}));
  EXPECT_EQ(parse_csv("a,,c", "t.csv")[0], (std::vector<std::string>{"a", "", "c"}));  // no final newline
  try {
    parse_csv("\"1\",\"never closed\n", "t.csv");
    ADD_FAILURE() << "an unclosed quote was accepted";
  } catch (const qkv::Error& e) {
    EXPECT_NE(std::string(e.what()).find("t.csv"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("line 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_csv("\"1\"x,2\n", "t.csv"), qkv::Error);  // text after the closing quote
}

TEST(Corpus, PangLeeFromPythonPatternMatchesAnIndependentRead) {
  const std::string data = qkv_test::scratch_dir("pang_lee");
  ExtraBuildOptions o;
  o.data_dir = data;
  const std::string cache = std::getenv("QKV_CACHE") ? std::getenv("QKV_CACHE") : default_cache_dir();
  o.cache_dir = cache;
  for (auto [which, n, file] : {std::tuple{PangLee::reviews, 1500, "1"}, std::tuple{PangLee::sentences, 4000, "2"}}) {
    BuildResult r = build_pang_lee_corpus(o, which);
    EXPECT_EQ(r.stats["examples"].get<int>(), n);  // the package's README: 1,500 reviews; 4,000 sentences
    // The same member, extracted by dpkg-deb, read by Python's csv module.
    const std::string deb = find_cached_deb(cache + "/debs", "python3-pattern");
    ASSERT_FALSE(deb.empty());
    const std::string x = data + "/x" + file;
    ASSERT_EQ(qkv_test::run_shell("mkdir -p '" + x + "' && dpkg-deb -x '" + deb + "' '" + x + "'"), 0);
    const std::string csv = x + "/usr/share/doc/python3-pattern/test/corpora/polarity-en-pang&lee" + file + ".csv";
    EXPECT_EQ(qkv_test::run_shell(qkv_test::python() + " " + qkv_test::tool("check_cls_corpus.py") + " '" + r.out_dir +
                                  "' --polarity-csv '" + csv + "'"),
              0);
    EXPECT_FALSE(build_pang_lee_corpus(o, which).built);  // a second build is a no-op
  }
}

TEST(Corpus, Conll2010FromPythonPatternMatchesAnIndependentRead) {
  const std::string data = qkv_test::scratch_dir("conll2010");
  ExtraBuildOptions o;
  o.data_dir = data;
  const std::string cache = std::getenv("QKV_CACHE") ? std::getenv("QKV_CACHE") : default_cache_dir();
  o.cache_dir = cache;
  BuildResult r = build_conll2010_corpus(o);
  // 3,000 records (the package's README: 1,500 certain, 1,500 uncertain), of which 43 repeat an
  // earlier text with the same label (Wikipedia titles such as "Pope Pius IX"): 2,957 distinct.
  EXPECT_EQ(r.stats["examples"].get<int>(), 2957);
  EXPECT_EQ(r.stats["records"].get<int>(), 3000);
  EXPECT_EQ(r.stats["labels"]["0"], "uncertain");
  EXPECT_EQ(r.stats["labels"]["1"], "certain");
  const std::string deb = find_cached_deb(cache + "/debs", "python3-pattern");
  ASSERT_FALSE(deb.empty());
  const std::string x = data + "/x";
  ASSERT_EQ(qkv_test::run_shell("mkdir -p '" + x + "' && dpkg-deb -x '" + deb + "' '" + x + "'"), 0);
  const std::string csv = x + "/usr/share/doc/python3-pattern/test/corpora/uncertainty-conll2010.csv";
  // Every distinct text with its label (1 certain -> "1", -1 uncertain -> "0"), each class 80/10/10.
  EXPECT_EQ(qkv_test::run_shell(qkv_test::python() + " " + qkv_test::tool("check_cls_corpus.py") + " '" + r.out_dir +
                                "' --polarity-csv '" + csv + "'"),
            0);
  EXPECT_FALSE(build_conll2010_corpus(o).built);  // a second build is a no-op
}
