// `qkv tokenize` and `qkv train-tokenizer` end to end through $QKV_BIN.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "text_fixtures.h"

using namespace qkv::testing;

namespace {

std::string qkv_bin() {
  const char* b = std::getenv("QKV_BIN");
  if (!b) throw std::runtime_error("QKV_BIN is not set (run through ctest)");
  return b;
}

struct CmdResult {
  int status;
  std::string out, err;
};

CmdResult run_qkv(const std::string& args, const std::string& stdin_text) {
  std::string in = scratch("cli_in.txt"), out = scratch("cli_out.txt"), err = scratch("cli_err.txt");
  std::ofstream(in, std::ios::binary) << stdin_text;
  std::string cmd = shell_quote(qkv_bin()) + " " + args + " < " + shell_quote(in) + " > " +
                    shell_quote(out) + " 2> " + shell_quote(err);
  int st = std::system(cmd.c_str());
  return {WEXITSTATUS(st), slurp(out), slurp(err)};
}

}  // namespace

TEST(CliTokenize, Gpt2DirectoryEncodeDecode) {
  std::string dir = shell_quote(npm_cache() + "/gpt2");
  CmdResult r = run_qkv("tokenize --tokenizer " + dir, "Hello world\n\n It's 2024!\n");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "15496 995\n\n632 338 48609 0\n");
  CmdResult d = run_qkv("tokenize --decode --tokenizer " + dir, "15496 995\n\n632 338 48609 0\n");
  ASSERT_EQ(d.status, 0) << d.err;
  EXPECT_EQ(d.out, "Hello world\n\n It's 2024!\n");
}

TEST(CliTokenize, BertVocabTxtWithTemplateAndPairs) {
  std::string vocab = shell_quote(npm_cache() + "/bert-base-uncased/vocab.txt");
  CmdResult r = run_qkv("tokenize -t " + vocab, "i like strawberries\n");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "1045 2066 13137 20968\n");
  r = run_qkv("tokenize --add-special-tokens --pair -t " + vocab, "i like\tstrawberries\n");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "101 1045 2066 102 13137 20968 102\t0 0 0 0 1 1 1\n");
  r = run_qkv("tokenize --tokens -t " + vocab, "strawberries\n");
  EXPECT_EQ(r.out, "straw ##berries\n");
}

TEST(CliTokenize, TrainThenTokenizeRoundTrip) {
  std::string corpus = test_text_path("bpe_train_100k.txt", 100000, true);
  // Two lines of words from the corpus (plain ASCII letters with white space on both sides, so that
  // every kind, word-level included, saw each of them as a whole word).
  std::string text, c = slurp(corpus);
  int words = 0;
  for (size_t i = 0; i < c.size() && words < 24;) {
    size_t j = i;
    while (j < c.size() && ((c[j] >= 'a' && c[j] <= 'z') || (c[j] >= 'A' && c[j] <= 'Z'))) ++j;
    const bool starts_word = i == 0 || c[i - 1] == ' ' || c[i - 1] == '\n';
    if (starts_word && j - i >= 2 && (j == c.size() || c[j] == ' ' || c[j] == '\n')) {
      text += c.substr(i, j - i) + (++words % 12 ? " " : "\n");
    }
    i = j + 1;
  }
  ASSERT_EQ(words, 24);
  std::string out = scratch("cli_bpe.json");
  for (std::string kind : {"bpe", "bytebpe", "char", "word"}) {
    std::string vs = kind == "bpe" || kind == "bytebpe" ? "600" : "100000";
    CmdResult t = run_qkv("train-tokenizer --kind " + kind + " --vocab-size " + vs + " --input " +
                          shell_quote(corpus) + " --out " + shell_quote(out), "");
    ASSERT_EQ(t.status, 0) << kind << ": " << t.err;
    CmdResult e = run_qkv("tokenize -t " + shell_quote(out), text);
    ASSERT_EQ(e.status, 0) << e.err;
    CmdResult d = run_qkv("tokenize --decode -t " + shell_quote(out), e.out);
    ASSERT_EQ(d.status, 0) << d.err;
    std::string want = text;  // word-level kinds join words with one space: no trailing space
    if (kind == "bpe" || kind == "word")
      for (size_t p; (p = want.find(" \n")) != std::string::npos;) want.erase(p, 1);
    EXPECT_EQ(d.out, want) << kind;
    EXPECT_EQ(e.out.find(" 1 "), std::string::npos) << kind << ": <unk> in " << e.out;
  }
}

TEST(CliTokenize, ErrorsNameTheFile) {
  CmdResult r = run_qkv("tokenize -t /nonexistent/tok.json", "x\n");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("/nonexistent/tok.json"), std::string::npos) << r.err;
  std::string bad = scratch("cli_bad.json");
  std::ofstream(bad) << R"({"model": {"type": "Unigram", "vocab": []}})";
  r = run_qkv("tokenize -t " + shell_quote(bad), "x\n");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cli_bad.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("model.type"), std::string::npos) << r.err;
  r = run_qkv("tokenize --decode -t " + shell_quote(npm_cache() + "/gpt2"), "12 abc\n");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("line 1"), std::string::npos) << r.err;
  r = run_qkv("train-tokenizer --kind bpe --vocab-size 100 --input /nonexistent/c.txt --out " +
              shell_quote(bad + ".out"), "");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("/nonexistent/c.txt"), std::string::npos) << r.err;
}
