// BPE training: Sennrich's example worked out by hand, agreement with a naive Python trainer,
// determinism, and byte-level training that round-trips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>

#include "qkv/text/bpe_train.h"
#include "qkv/util/error.h"
#include "text_fixtures.h"

using namespace qkv::text;
using namespace qkv::testing;

namespace {
using Merges = std::vector<BpeTokenizer::Merge>;
BpeTrainOptions word_opts(int vocab_size) {
  BpeTrainOptions o;
  o.vocab_size = vocab_size;
  o.special_tokens = {};
  o.unk_token = "";
  return o;
}
}  // namespace

// Sennrich et al. 2016, section 3.2: {low: 5, lower: 2, newest: 6, widest: 3}. Each step by hand
// (counts in brackets; ties go to the smaller (left, right) strings):
//  e s [9, ties s t</w>]  es t</w> [9]  l o [7]  e w [6, ties n e, w est</w>]  ew est</w> [6]
//  n ewest</w> [6]  lo w</w> [5]  d est</w> [3, ties w i, i d]  i dest</w> [3]  w idest</w> [3]
//  e r</w> [2, ties lo w, w e]  lo w [2]  low er</w> [2]
TEST(BpeTrain, ANonPositiveVocabularySizeIsAnError) {  // -5 learned the alphabet, silently
  const std::unordered_map<std::string, int64_t> counts{{"low", 5}, {"lower", 2}};
  for (int v : {0, -5}) EXPECT_THROW(learn_bpe(counts, word_opts(v)), qkv::Error) << v;
  EXPECT_NO_THROW(learn_bpe(counts, word_opts(2)));  // smaller than the alphabet: the alphabet, as Hugging Face's
}

// A special token that is also a symbol or a merge of the text is refused by name: it took that
// token's id, and decoding (which drops special tokens) lost the text ("low lower" came back "lower").
TEST(BpeTrain, ASpecialTokenTheTextCanProduceIsRefused) {
  const std::unordered_map<std::string, int64_t> counts{{"low", 5}, {"lower", 2}};
  for (const auto& [special, as] : std::vector<std::pair<std::string, std::string>>{
           {"low</w>", "is also the merge of 'lo' and 'w</w>'"}, {"l", "is also a symbol"}}) {
    BpeTrainOptions o = word_opts(100);
    o.special_tokens = {"<unk>", special};
    try {
      learn_bpe(counts, o);
      ADD_FAILURE() << special << " accepted";
    } catch (const qkv::Error& e) {
      EXPECT_NE(std::string(e.what()).find("special token '" + special + "' " + as), std::string::npos) << e.what();
    }
  }
  BpeTrainOptions o = word_opts(100);
  o.special_tokens = {"<unk>", "<low>"};
  EXPECT_NO_THROW(learn_bpe(counts, o));
}

TEST(BpeTrain, SennrichExampleByHand) {
  std::unordered_map<std::string, int64_t> counts = {{"low", 5}, {"lower", 2}, {"newest", 6}, {"widest", 3}};
  BpeTrainResult r = learn_bpe(counts, word_opts(1000));
  Merges want = {{"e", "s"}, {"es", "t</w>"}, {"l", "o"}, {"e", "w"}, {"ew", "est</w>"},
                 {"n", "ewest</w>"}, {"lo", "w</w>"}, {"d", "est</w>"}, {"i", "dest</w>"},
                 {"w", "idest</w>"}, {"e", "r</w>"}, {"lo", "w"}, {"low", "er</w>"}};
  EXPECT_EQ(r.merges, want);
  // Alphabet (11 symbols, sorted) then one token per merge.
  ASSERT_EQ(r.vocab.size(), 11u + 13u);
  EXPECT_EQ(r.vocab[0], "d");
  EXPECT_EQ(r.vocab[10], "w</w>");
  EXPECT_EQ(r.vocab[11], "es");
  EXPECT_EQ(r.vocab[23], "lower</w>");

  // Encoding with the learned merges (lowest rank first): l o w e s t</w> -> (e s) (es t</w>)
  // (l o) (lo w) -> low est</w>;  n e w e r</w> -> (e w) (e r</w>) -> n ew er</w>.
  BpeOptions bo;
  bo.byte_level = false;
  bo.end_of_word_suffix = "</w>";
  BpeTokenizer tok(r.vocab, r.merges, bo);
  auto ids = tok.encode("lowest newer");
  std::vector<std::string> toks;
  for (auto id : ids) toks.push_back(tok.id_to_token(id));
  EXPECT_EQ(toks, (std::vector<std::string>{"low", "est</w>", "n", "ew", "er</w>"}));
  EXPECT_EQ(tok.decode(ids), "lowest newer");

  // Stopping at a vocabulary size: 11 + 3 merges.
  EXPECT_EQ(learn_bpe(counts, word_opts(14)).merges.size(), 3u);
}

TEST(BpeTrain, MergesEqualNaivePythonTrainer) {
  std::string path = test_text_path("bpe_train_100k.txt", 100000, true);
  std::string ref = scratch("py.merges");
  run_command("/usr/bin/python3 " + std::string(QKV_SOURCE_DIR) + "/tools/text/bpe_train_reference.py " +
              shell_quote(path) + " " + shell_quote(ref) + " --merges 300");
  auto lines = read_lines(ref);
  ASSERT_EQ(lines.size(), 300u);
  WordCounter wc(false);
  wc.add(slurp(path));
  auto o = word_opts(1 << 20);
  BpeTrainResult r = learn_bpe(wc.counts(), o);
  ASSERT_GE(r.merges.size(), 300u);
  for (size_t i = 0; i < 300; ++i)
    ASSERT_EQ(r.merges[i].first + " " + r.merges[i].second, lines[i]) << "merge " << i;
}

TEST(BpeTrain, DeterministicAndIndependentOfLineOrder) {
  std::string text = slurp(test_text_path("bpe_train_100k.txt", 100000, true));
  auto lines = split_lines_keep_newline(text);
  std::mt19937 rng(7);
  std::shuffle(lines.begin(), lines.end(), rng);
  std::string shuffled;
  for (auto& l : lines) shuffled += l;
  BpeTrainOptions o;
  o.byte_level = true;
  o.vocab_size = 1500;
  o.special_tokens = {"<|endoftext|>"};
  // Counted line by line, so that the shuffled corpus has exactly the same word counts.
  WordCounter a(true), b(true), c(true);
  for (auto& l : split_lines_keep_newline(text)) a.add(l), b.add(l);
  for (auto& l : split_lines_keep_newline(shuffled)) c.add(l);
  auto ra = learn_bpe(a.counts(), o), rb = learn_bpe(b.counts(), o), rc = learn_bpe(c.counts(), o);
  EXPECT_EQ(ra.merges.size(), 1500u - 1 - 256);
  EXPECT_EQ(ra.merges, rb.merges);
  EXPECT_EQ(ra.vocab, rb.vocab);
  EXPECT_EQ(ra.merges, rc.merges);
}

TEST(BpeTrain, ByteLevelTrainedTokenizerRoundTrips) {
  std::string path = test_text_path("gpt2_1mb.txt", 1100000, false);
  BpeTrainOptions o;
  o.byte_level = true;
  o.vocab_size = 2000;
  o.special_tokens = {"<|endoftext|>"};
  auto tok = train_bpe({path}, o);
  EXPECT_EQ(tok->vocab_size(), 2000);
  EXPECT_EQ(tok->require_special_id(Role::Eos), 0);
  std::string text = slurp(path);
  auto ids = tok->encode(text);
  EXPECT_LT(ids.size(), text.size() / 2);  // it compresses
  EXPECT_EQ(tok->decode(ids), text);       // invalid UTF-8 included
  EXPECT_EQ(tok->encode("<|endoftext|>a"), (std::vector<int32_t>{0, *tok->token_to_id("a")}));
}

TEST(BpeTrain, WordLevelUnknownCharacterUsesUnk) {
  std::string path = test_text_path("bpe_train_100k.txt", 100000, true);
  BpeTrainOptions o;
  o.vocab_size = 500;
  auto tok = train_bpe({path}, o);
  int32_t unk = tok->require_special_id(Role::Unk);
  EXPECT_EQ(unk, 1);
  const std::string vai = "\xea\x94\x80";  // U+A500, a script the test text does not use
  ASSERT_EQ(slurp(path).find(vai), std::string::npos);
  auto ids = tok->encode(vai);
  EXPECT_EQ(ids, (std::vector<int32_t>{unk}));
  EXPECT_THROW(train_bpe({"/nonexistent/file.txt"}, o), qkv::Error);
}

// Word-level BPE keeps the text's own bytes in its vocabulary, which tokenizer.json must hold as
// UTF-8: invalid input is refused by file and line before learning (byte-level BPE, above, takes
// any bytes). It used to fail only when saving, with a bare JSON library message.
TEST(BpeTrain, WordLevelRefusesInvalidUtf8ByFileAndLine) {
  const std::string path = ::testing::TempDir() + "/qkv_bpe_bad_utf8.txt";
  {
    std::ofstream f(path, std::ios::binary);
    f << "good line\nanother good one\nbad \xff here\nlast\n";
  }
  try {
    train_bpe({path}, word_opts(50));
    ADD_FAILURE() << "invalid UTF-8 was learned from";
  } catch (const qkv::Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":3: not valid UTF-8 (byte 5 of the line)"), std::string::npos)
        << e.what();
  }
  std::remove(path.c_str());
}
