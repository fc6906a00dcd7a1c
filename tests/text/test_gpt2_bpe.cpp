// GPT-2 byte-level BPE against the JavaScript reference (gpt-3-encoder under node) on >= 1 MB of
// varied text (tools/text/make_test_text.py), plus hand-checked pattern cases.
#include <gtest/gtest.h>

#include "qkv/text/bpe.h"
#include "qkv/text/pretokenize.h"
#include "qkv/util/unicode.h"
#include "gpt2_tokenizer.h"
#include "text_fixtures.h"

using namespace qkv::text;
using namespace qkv::testing;

namespace {

struct JsReference {
  std::string text_path, pieces_path;
  std::vector<std::string> lines;  // input lines, each with its '\n'
  std::vector<std::string> ids, pieces;
};

const JsReference& js_reference() {
  static const JsReference ref = [] {
    JsReference r;
    r.text_path = test_text_path("gpt2_1mb.txt", 1100000, false);
    std::string base = npm_cache();
    std::string js = std::string(QKV_SOURCE_DIR) + "/tools/text/gpt2_js_encode.js";
    std::string ids = scratch("gpt2.js.ids"), pieces = scratch("gpt2.js.pieces");
    run_command("node " + shell_quote(js) + " " + shell_quote(base) + " " + shell_quote(r.text_path) +
                " " + shell_quote(ids));
    run_command("node " + shell_quote(js) + " " + shell_quote(base) + " " + shell_quote(r.text_path) +
                " " + shell_quote(pieces) + " --pieces");
    r.lines = split_lines_keep_newline(slurp(r.text_path));
    r.ids = read_lines(ids);
    r.pieces = read_lines(pieces);
    r.pieces_path = pieces;
    return r;
  }();
  return ref;
}

std::string hex(std::string_view s) {
  static const char* h = "0123456789abcdef";
  std::string o;
  for (unsigned char c : s) o += h[c >> 4], o += h[c & 15];
  return o;
}

}  // namespace

TEST(Gpt2Pretokenize, HandCheckedCases) {
  auto P = [](std::string_view s) { return gpt2_pretokenize(s); };
  using V = std::vector<std::string_view>;
  EXPECT_EQ(P("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(P("I'm don't we'll they're I've he'd it's"),
            (V{"I", "'m", " don", "'t", " we", "'ll", " they", "'re", " I", "'ve", " he", "'d", " it", "'s"}));
  EXPECT_EQ(P("a  b"), (V{"a", " ", " b"}));          // \s+(?!\S) leaves the last space
  EXPECT_EQ(P("a \t\nb"), (V{"a", " \t", "\n", "b"}));
  EXPECT_EQ(P("x   "), (V{"x", "   "}));              // trailing run: whole
  EXPECT_EQ(P("3.14 !!? 'S"), (V{"3", ".", "14", " !!?", " '", "S"}));
  EXPECT_EQ(P("\xff\xfe!a"), (V{"\xff\xfe!", "a"}));  // invalid bytes are "other"
  EXPECT_EQ(P("日本語 text"), (V{"日本語", " text"}));
}

TEST(Gpt2Pretokenize, PiecesEqualJsPatternOn1MB) {
  const auto& r = js_reference();
  ASSERT_GE(slurp(r.text_path).size(), 1000000u);
  ASSERT_EQ(r.lines.size(), r.pieces.size());
  size_t bad = 0;
  for (size_t i = 0; i < r.lines.size(); ++i) {
    std::string got;
    for (auto p : gpt2_pretokenize(r.lines[i])) got += (got.empty() ? "" : " ") + hex(p);
    if (got != r.pieces[i] && bad++ < 5)
      ADD_FAILURE() << "line " << i << " '" << r.lines[i] << "'\n qkv: " << got << "\n  js: " << r.pieces[i];
  }
  EXPECT_EQ(bad, 0u);
}

TEST(Gpt2Bpe, IdsEqualJsEncoderOn1MB) {
  const auto& r = js_reference();
  auto tok = gpt2(/*quirk=*/true);
  ASSERT_EQ(r.lines.size(), r.ids.size());
  size_t bad = 0, n_ids = 0;
  for (size_t i = 0; i < r.lines.size(); ++i) {
    std::vector<int32_t> want = parse_ids(r.ids[i]);
    std::vector<int32_t> got = tok->encode(r.lines[i]);
    n_ids += want.size();
    if (got != want && bad++ < 5) {
      std::string g;
      for (auto id : got) g += std::to_string(id) + " ";
      ADD_FAILURE() << "line " << i << " '" << r.lines[i] << "'\n qkv: " << g << "\n  js: " << r.ids[i];
    }
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_GT(n_ids, 200000u);
}

// The default mode (OpenAI's and Hugging Face's merge lookup, used by `qkv tokenize`, tokenizer.json
// and every GPT model) against OpenAI's algorithm re-written in Python (tools/text/gpt2_reference.py,
// merges keyed by the pair itself) on the same pre-tokens: equal on every line. The two modes
// differ only where gpt-3-encoder's string key "left,right" makes a non-merge pair look like a
// merge; the count of lines where they differ is reported (0 on this text; docs/tokenizers.md).
TEST(Gpt2Bpe, DefaultModeEqualsOpenAIAlgorithmOn1MB) {
  const auto& r = js_reference();
  std::string py = scratch("gpt2.py.ids");
  run_command("/usr/bin/python3 " + std::string(QKV_SOURCE_DIR) + "/tools/text/gpt2_reference.py " +
              shell_quote(npm_cache() + "/gpt2") + " " + shell_quote(r.pieces_path) + " " + shell_quote(py));
  std::vector<std::string> want = read_lines(py);
  ASSERT_EQ(want.size(), r.lines.size());
  auto tok = gpt2(/*quirk=*/false);
  size_t bad = 0, n_ids = 0, modes_differ = 0;
  for (size_t i = 0; i < r.lines.size(); ++i) {
    std::vector<int32_t> got = tok->encode(r.lines[i]), expect = parse_ids(want[i]);
    n_ids += expect.size();
    modes_differ += want[i] != r.ids[i];
    if (got != expect && bad++ < 5) {
      std::string g;
      for (auto id : got) g += std::to_string(id) + " ";
      ADD_FAILURE() << "line " << i << " '" << r.lines[i] << "'\n qkv: " << g << "\n  py: " << want[i];
    }
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_GT(n_ids, 200000u);
  std::printf("gpt2: %zu of %zu lines where OpenAI's lookup and gpt-3-encoder's differ\n", modes_differ, r.lines.size());
}

TEST(Gpt2Bpe, DecodeRoundTripsBytesExactly) {
  const auto& r = js_reference();
  auto tok = gpt2(false);
  std::string all = slurp(r.text_path);
  auto ids = tok->encode(all);
  EXPECT_EQ(tok->decode(ids), all);
}

// Node's regex engine (Unicode 17 in node 20.20) against qkv's Unicode 14 tables: \s must agree
// everywhere; \p{L}/\p{N} may differ only on code points that Unicode 14 leaves unassigned
// (general category Cn in Python's unicodedata 14.0.0, read here independently of qkv's tables),
// i.e. characters added later; qkv must put those in "other". Documented in docs/tokenizers.md.
TEST(Gpt2Unicode, DifferencesFromNodeAreOnlyNewerCharacters) {
  std::string out = scratch("js_classes.bin");
  std::string ver = run_command("node " + std::string(QKV_SOURCE_DIR) + "/tools/text/js_unicode_classes.js " +
                                shell_quote(out));
  std::string js = slurp(out);
  ASSERT_EQ(js.size(), 0x110000u);
  // One byte per code point: 1 where Python's Unicode 14 database has it unassigned (Cn).
  std::string cn_path = scratch("py_unassigned.bin");
  run_command("/usr/bin/python3 -c " + shell_quote(
      "import sys, unicodedata as u\n"
      "assert u.unidata_version == '14.0.0', u.unidata_version\n"
      "sys.stdout.buffer.write(bytes(u.category(chr(c)) == 'Cn' for c in range(0x110000)))") +
      " > " + shell_quote(cn_path));
  std::string cn = slurp(cn_path);
  ASSERT_EQ(cn.size(), 0x110000u);
  size_t newer = 0;
  for (uint32_t c = 0; c < 0x110000; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    int j = (unsigned char)js[c];
    bool jl = j & 1, jn = j & 2, js_space = j & 4;
    ASSERT_EQ(js_space, qkv::unicode::is_js_space(c)) << std::hex << c;
    if (jl != qkv::unicode::is_letter(c) || jn != qkv::unicode::is_number(c)) {
      ASSERT_TRUE(cn[c] == 1) << "U+" << std::hex << c << " is assigned in Unicode 14, and qkv and node's " << ver
                              << " disagree on whether it is a letter or number";
      ASSERT_TRUE(qkv::unicode::is_other_category(c) && !qkv::unicode::is_letter(c) &&
                  !qkv::unicode::is_number(c))
          << "U+" << std::hex << c << " is unassigned in Unicode 14 but not 'other' for qkv";
      ++newer;
    }
  }
  std::printf("node Unicode %s: %zu code points unassigned in Unicode 14 are L/N there\n",
              ver.substr(0, ver.size() - 1).c_str(), newer);
}
