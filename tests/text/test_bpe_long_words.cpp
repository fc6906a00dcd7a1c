// BPE on long pre-tokens, where bpe_word leaves the rescanning merge loop for the priority queue
// (bpe_merge.cpp): both loops on every pre-token of the 1 MB test text and on long ones, and the
// long ones' ids against gpt-3-encoder (node) and OpenAI's algorithm (tools/text/gpt2_reference.py).
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "qkv/text/bpe.h"
#include "qkv/text/pretokenize.h"
#include "gpt2_tokenizer.h"
#include "text_fixtures.h"

using namespace qkv::text;
using namespace qkv::testing;

namespace {

std::string letters_of(const std::string& text) {
  std::string s;
  for (char c : text)
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) s += c;
  return s;
}

// One long pre-token per line: letters of real text run together, random letters, and runs of
// punctuation with ',' and '"' (the pairs that gpt-3-encoder's comma keys tie in rank).
std::vector<std::string> long_lines(const std::string& text) {
  const std::string letters = letters_of(text), punct = ",\",\"'.;:!?-(),\"";
  std::mt19937 rng(7);
  std::vector<std::string> lines;
  for (int k = 0; k < 24; ++k) {
    const size_t len = 150 + rng() % 1400;
    std::string s;
    if (k % 3 == 0) s = letters.substr(rng() % (letters.size() - len), len);
    else if (k % 3 == 1) for (size_t i = 0; i < len; ++i) s += char('a' + rng() % 26);
    else for (size_t i = 0; i < len; ++i) s += punct[rng() % punct.size()];
    lines.push_back(s);
  }
  return lines;
}

std::vector<int32_t> initial_symbols(const BpeTokenizer& tok, std::string_view word) {
  std::vector<int32_t> syms;
  for (char c : word) {  // a single byte is never merged: its symbol
    std::vector<int32_t> one;
    tok.bpe_word(std::string_view(&c, 1), one);
    syms.push_back(one.at(0));
  }
  return syms;
}

}  // namespace

TEST(BpeMerge, QueueEqualsScanOnEveryPreTokenOf1MBAndLongOnes) {
  const std::string text = slurp(test_text_path("gpt2_1mb.txt", 1100000, false));
  for (bool quirk : {false, true}) {
    auto tok = gpt2(quirk);
    size_t words = 0, bad = 0, merged = 0;
    auto check = [&](std::string_view w) {
      std::vector<int32_t> scan = initial_symbols(*tok, w), queue = scan;
      tok->merge_by_scan(scan);
      tok->merge_by_queue(queue);
      ++words, merged += w.size() - scan.size();
      if (scan != queue && bad++ < 5) ADD_FAILURE() << "quirk " << quirk << ": '" << std::string(w) << "'";
    };
    for (std::string_view w : gpt2_pretokenize(text)) check(w);
    for (const std::string& w : long_lines(text)) check(w);
    EXPECT_EQ(bad, 0u) << "of " << words;
    EXPECT_GT(merged, 500000u);  // the loops did merge
  }
}

TEST(Gpt2Bpe, LongPreTokensEqualJsEncoderAndOpenAIAlgorithm) {
  const std::vector<std::string> lines = long_lines(slurp(test_text_path("gpt2_1mb.txt", 1100000, false)));
  const std::string in = scratch("gpt2_long.txt"), js_ids = scratch("gpt2_long.js.ids"),
                    pieces = scratch("gpt2_long.js.pieces"), py_ids = scratch("gpt2_long.py.ids");
  {
    std::ofstream f(in, std::ios::binary);
    for (const std::string& l : lines) f << l << '\n';
  }
  const std::string js = std::string(QKV_SOURCE_DIR) + "/tools/text/gpt2_js_encode.js";
  run_command("node " + shell_quote(js) + " " + shell_quote(npm_cache()) + " " + shell_quote(in) + " " +
              shell_quote(js_ids));
  run_command("node " + shell_quote(js) + " " + shell_quote(npm_cache()) + " " + shell_quote(in) + " " +
              shell_quote(pieces) + " --pieces");
  run_command("/usr/bin/python3 " + std::string(QKV_SOURCE_DIR) + "/tools/text/gpt2_reference.py " +
              shell_quote(npm_cache() + "/gpt2") + " " + shell_quote(pieces) + " " + shell_quote(py_ids));
  const std::vector<std::string> want_js = read_lines(js_ids), want_py = read_lines(py_ids);
  ASSERT_EQ(want_js.size(), lines.size());
  ASSERT_EQ(want_py.size(), lines.size());
  auto quirk = gpt2(true), plain = gpt2(false);
  size_t long_ones = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string line = lines[i] + "\n";
    EXPECT_EQ(quirk->encode(line), parse_ids(want_js[i])) << "line " << i << " (gpt-3-encoder)";
    EXPECT_EQ(plain->encode(line), parse_ids(want_py[i])) << "line " << i << " (OpenAI's algorithm)";
    for (std::string_view w : gpt2_pretokenize(line)) long_ones += w.size() > 128;
  }
  EXPECT_GE(long_ones, lines.size());  // every line reaches the queue
}

// gpt-3-encoder's comma keys can tie two overlapping pairs in rank: merge 2 (a, "a,a") has the key
// "a,a,a", which ("a,a", a) also spells. On "a" "a,a" "a" its algorithm takes the later pair (the
// last pair of minimal rank it sees): "a" "a,aa"; OpenAI's takes the real merge: "aa,a" "a". Both
// loops, on one segment (the scan) and forty in one pre-token (the queue).
TEST(BpeMerge, EqualRankPairsTakeTheLaterOneAsGpt3EncoderDoes) {
  const std::vector<std::string> vocab = {"a", ",", "b", "a,", "a,a", "aa,a", "a,aa"};
  const std::vector<BpeTokenizer::Merge> merges = {{"a", ","}, {"a,", "a"}, {"a", "a,a"}};
  std::string long_word;
  for (int i = 0; i < 40; ++i) long_word += "aa,aab";
  for (bool quirk : {true, false}) {
    BpeOptions opt;
    opt.byte_level = false;
    opt.js_comma_key_quirk = quirk;
    BpeTokenizer tok(vocab, merges, opt);
    const std::vector<int32_t> segment = quirk ? std::vector<int32_t>{0, 6} : std::vector<int32_t>{5, 0};
    EXPECT_EQ(tok.encode("aa,aa"), segment) << "quirk " << quirk;
    std::vector<int32_t> want;
    for (int i = 0; i < 40; ++i) want.insert(want.end(), segment.begin(), segment.end()), want.push_back(2);
    EXPECT_EQ(tok.encode(long_word), want) << "quirk " << quirk;
  }
}
