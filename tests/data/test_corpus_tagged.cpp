// The tagging corpora's pieces (data/corpus_tagged.h): the ner-debian rule labeller on synthetic
// package records (each rule, its boundaries and its order), the word and sentence splitting, the
// package names a record allows, and pos-wsj's word/TAG lines with their errors; pos-wsj built
// from Debian's python3-pattern against an independent read of the member in Python
// (tools/text/check_tag_corpus.py).
#include "qkv/data/corpus_tagged.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "qkv/data/debian.h"
#include "qkv/util/error.h"
#include "scratch_util.h"

using namespace qkv::data;

namespace {

using Words = std::vector<std::string>;

std::string type_of(const std::string& w, const std::set<std::string>& names = {}) { return ner_word_type(w, names); }

}  // namespace

TEST(NerDebianRules, EachEntityTypeAndItsBoundaries) {
  for (const char* w : {"http://example.org", "https://github.com/a/b", "ftp://ftp.gnu.org/gnu/", "git://x.org/r.git",
                        "svn://svn.x.org", "www.example.org"})
    EXPECT_EQ(type_of(w), "URL") << w;
  for (const char* w : {"http://", "www.example", "wwwexample.org"}) EXPECT_NE(type_of(w), "URL") << w;
  for (const char* w : {"jane@example.org", "a.b+c@lists.debian.org", "x_y%z@mail-1.example.co.uk"})
    EXPECT_EQ(type_of(w), "EMAIL") << w;
  for (const char* w : {"@example.org", "a@b", "a@b.c", "a@@b.org", "a@b..org", "a@b.o2"})
    EXPECT_NE(type_of(w), "EMAIL") << w;
  for (const char* w : {"/usr/bin/foo", "/etc", "~/.config/app", "/usr/share/doc/*.gz", "/.hidden"})
    EXPECT_EQ(type_of(w), "PATH") << w;
  for (const char* w : {"/", "//server/share", "/-x", "and/or", "/usr/bin/foo,bar"}) EXPECT_NE(type_of(w), "PATH") << w;
  for (const char* w : {"2.6", "1.0.2k", "v3.11", "V2.0", "2.0-beta1", "1.2+dfsg", "0.9~rc1", "1.5"})
    EXPECT_EQ(type_of(w), "VER") << w;
  for (const char* w : {"2", "v2", "2.", ".5", "2.6.x", "1.0.2kk", "2.0-", "v", "1.2-a/b"})
    EXPECT_NE(type_of(w), "VER") << w;
  const std::set<std::string> names = {"perl", "python3", "x", "libfoo-dev"};
  EXPECT_EQ(type_of("perl", names), "PKG");
  EXPECT_EQ(type_of("libfoo-dev", names), "PKG");
  EXPECT_EQ(type_of("Perl", names), "");  // case-sensitive
  EXPECT_EQ(type_of("x", names), "");     // at least two characters
  EXPECT_EQ(type_of("perl5", names), "");
  // The order: a URL holding a path or a version is a URL; a path that is a version is a path.
  EXPECT_EQ(type_of("http://example.org/1.2"), "URL");
  EXPECT_EQ(type_of("/1.2"), "PATH");
  EXPECT_EQ(type_of("2.6", {"2.6"}), "VER");
}

TEST(NerDebianRules, WordsAndSentences) {
  EXPECT_EQ(ner_tokenize("See (http://x.org/a). Uses \"perl\", 2.6!"),
            (Words{"See", "(", "http://x.org/a", ")", ".", "Uses", "\"", "perl", "\"", ",", "2.6", "!"}));
  EXPECT_EQ(ner_tokenize("  <jane@example.org>;  /etc/  "), (Words{"<", "jane@example.org", ">", ";", "/etc/"}));
  EXPECT_EQ(ner_tokenize("..."), (Words{".", ".", "."}));
  const auto s = ner_sentences(Words{"It", "runs", ".", "it", "is", "e.g", ".", "Fast", "!", "Yes", "."});
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0], (Words{"It", "runs", ".", "it", "is", "e.g", "."}));  // no upper-case word after the first "."
  EXPECT_EQ(s[1], (Words{"Fast", "!"}));
  EXPECT_EQ(s[2], (Words{"Yes", "."}));
}

TEST(NerDebianRules, PackageNamesOfARecord) {
  const std::map<std::string, std::string> rec = {
      {"Package", "foo-tools"},
      {"Depends", "libc6 (>= 2.34), python3:any | python3-minimal, perl [amd64] <!nocheck>"},
      {"Pre-Depends", "dpkg (>= 1.15)"},
      {"Recommends", "less\n , curl"},
      {"Suggests", "emacs"}};
  EXPECT_EQ(package_names_of(rec),
            (std::set<std::string>{"curl", "dpkg", "foo-tools", "less", "libc6", "perl", "python3", "python3-minimal"}));
}

TEST(NerDebianRules, ASyntheticPackageLabelledEndToEnd) {
  const std::map<std::string, std::string> rec = {
      {"Package", "foo-tools"},
      {"Depends", "perl, libc6"},
      {"Suggests", "emacs"},
      {"Description", "foo-tools - utilities for foo 2.6"}};
  const auto t = ner_label_package(
      rec, "This package uses perl and emacs. Report bugs to jane@example.org or see http://foo.org. "
           "Files go to /usr/share/foo.");
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].words, (Words{"foo-tools", "-", "utilities", "for", "foo", "2.6"}));
  EXPECT_EQ(t[0].tags, (Words{"B-PKG", "O", "O", "O", "O", "B-VER"}));
  EXPECT_EQ(t[1].tags, (Words{"O", "O", "O", "B-PKG", "O", "O", "O"}));  // emacs is only suggested: O
  EXPECT_EQ(t[2].words, (Words{"Report", "bugs", "to", "jane@example.org", "or", "see", "http://foo.org", "."}));
  EXPECT_EQ(t[2].tags, (Words{"O", "O", "O", "B-EMAIL", "O", "O", "B-URL", "O"}));
  EXPECT_EQ(t[3].tags, (Words{"O", "O", "O", "B-PATH", "O"}));
  // Without a long description: the summary alone.
  EXPECT_EQ(ner_label_package(rec, "").size(), 1u);
}

TEST(PosWsj, SlashTaggedLines) {
  const TaggedWords t = parse_slash_tagged("Pierre/NNP 61/CD ,/, 1\\/2/CD  ./.", "f:1");
  EXPECT_EQ(t.words, (Words{"Pierre", "61", ",", "1\\/2", "."}));
  EXPECT_EQ(t.tags, (Words{"NNP", "CD", ",", "CD", "."}));
  for (const char* bad : {"Pierre/NNP Vinken", "Pierre/NNP /NNP", "Pierre/NNP Vinken/"}) {
    try {
      parse_slash_tagged(bad, "tagged-en-wsj.txt:7");
      FAIL() << "no error for '" << bad << "'";
    } catch (const qkv::Error& e) {
      EXPECT_NE(std::string(e.what()).find("tagged-en-wsj.txt:7"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("token 2"), std::string::npos) << bad << ": " << e.what();
    }
  }
}

TEST(Corpus, PosWsjFromPythonPatternMatchesAnIndependentRead) {
  const std::string data = qkv_test::scratch_dir("pos_wsj");
  ExtraBuildOptions o;
  o.data_dir = data;
  const std::string cache = std::getenv("QKV_CACHE") ? std::getenv("QKV_CACHE") : default_cache_dir();
  o.cache_dir = cache;
  BuildResult r = build_pos_wsj_corpus(o);
  // 1,000 newlines and a last line without one: 1,001 sentences (the package's README says 1,000).
  EXPECT_EQ(r.stats["examples"].get<int>(), 1001);
  const std::string deb = find_cached_deb(cache + "/debs", "python3-pattern");
  ASSERT_FALSE(deb.empty());
  const std::string x = data + "/x";
  ASSERT_EQ(qkv_test::run_shell("mkdir -p '" + x + "' && dpkg-deb -x '" + deb + "' '" + x + "'"), 0);
  EXPECT_EQ(qkv_test::run_shell(qkv_test::python() + " " + qkv_test::tool("check_tag_corpus.py") + " '" + r.out_dir +
                                "' --wsj '" + x + "/usr/share/doc/python3-pattern/test/corpora/tagged-en-wsj.txt'"),
            0);
  EXPECT_FALSE(build_pos_wsj_corpus(o).built);  // a second build is a no-op
}
