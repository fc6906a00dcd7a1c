// GPT-2 byte-level BPE against the JavaScript reference (gpt-3-encoder under node) on >= 1 MB of
// varied text (tools/text/make_test_text.py), plus hand-checked pattern cases.
#include <gtest/gtest.h>

#include "qkv/text/bpe.h"
#include "qkv/text/pretokenize.h"
#include "qkv/text/unicode.h"
#include "text_fixtures.h"

using namespace qkv::text;
using namespace qkv::testing;

namespace {

struct JsReference {
  std::string text_path;
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
    return r;
  }();
  return ref;
}

std::unique_ptr<BpeTokenizer> gpt2(bool quirk) {
  std::string d = npm_cache() + "/gpt2/";
  return BpeTokenizer::load_gpt2(d + "encoder.json", d + "vocab.bpe", quirk);
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

TEST(Gpt2Bpe, DecodeRoundTripsBytesExactly) {
  const auto& r = js_reference();
  auto tok = gpt2(false);
  std::string all = slurp(r.text_path);
  auto ids = tok->encode(all);
  EXPECT_EQ(tok->decode(ids), all);
}

// Node's regex engine (Unicode 17 in node 20.20) against qkv's Unicode 14 tables: \s must agree
// everywhere; \p{L}/\p{N} may differ only on code points that Unicode 14 leaves unassigned
// (qkv: category C), i.e. characters added later. Documented in docs/tokenizers.md.
TEST(Gpt2Unicode, DifferencesFromNodeAreOnlyNewerCharacters) {
  std::string out = scratch("js_classes.bin");
  std::string ver = run_command("node " + std::string(QKV_SOURCE_DIR) + "/tools/text/js_unicode_classes.js " +
                                shell_quote(out));
  std::string js = slurp(out);
  ASSERT_EQ(js.size(), 0x110000u);
  size_t newer = 0;
  for (uint32_t c = 0; c < 0x110000; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    int j = (unsigned char)js[c];
    bool jl = j & 1, jn = j & 2, js_space = j & 4;
    ASSERT_EQ(js_space, qkv::text::unicode::is_js_space(c)) << std::hex << c;
    if (jl != qkv::text::unicode::is_letter(c) || jn != qkv::text::unicode::is_number(c)) {
      ASSERT_TRUE(qkv::text::unicode::is_other_category(c) && !qkv::text::unicode::is_letter(c) &&
                  !qkv::text::unicode::is_number(c))
          << "U+" << std::hex << c << " changed category between Unicode 14 and node's " << ver;
      ++newer;
    }
  }
  std::printf("node Unicode %s: %zu code points unassigned in Unicode 14 are L/N there\n",
              ver.substr(0, ver.size() - 1).c_str(), newer);
}
