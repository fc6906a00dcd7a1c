// `qkv score` end to end (src/cli/cmd_score.cpp, Translator::score): a small Transformer trained
// with protected spans on "copy w.. SPAN" -> "kopiere w.. SPAN" scores held-out pairs. The printed
// scores are the library's to the last bit, the same in every run (eval mode: the model has
// dropout), from --input or --src/--tgt or stdin; --normalize and --word-scores are the sum's mean
// and parts; a reference whose span the source shares scores as training saw it (a placeholder),
// far above the same pair scored without protection; malformed input is an error naming the line;
// a pair past the model's length is truncated with a warning, or refused (--on-long refuse).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <sstream>

#include "qkv/tasks/translation_training.h"
#include "qkv/tasks/translator.h"
#include "qkv/util/file.h"
#include "run_qkv.h"

namespace fs = std::filesystem;
using namespace qkv;
using namespace qkv::testing;

namespace {

std::vector<std::pair<std::string, std::string>> make_pairs(int n, uint64_t seed) {
  const char* words[] = {"alpha", "beta", "gamma", "delta", "eps", "zeta"};
  std::mt19937_64 rng(seed);
  std::vector<std::pair<std::string, std::string>> out;
  for (int i = 0; i < n; ++i) {
    std::string span = "--", body;
    for (int k = 0; k < 5; ++k) span += char('a' + rng() % 26);
    for (int k = 0, len = 1 + int(rng() % 3); k < len; ++k) body += std::string(" ") + words[rng() % 6];
    out.push_back({"copy" + body + " " + span, "kopiere" + body + " " + span});
  }
  return out;
}

std::string tsv(const std::vector<std::pair<std::string, std::string>>& pairs) {
  std::string s;
  for (auto& [a, b] : pairs) s += a + "\t" + b + "\n";
  return s;
}

std::vector<std::vector<double>> numbers(const std::string& text) {
  std::vector<std::vector<double>> rows;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    rows.emplace_back();
    for (std::string f; fields >> f;) rows.back().push_back(std::stod(f));
  }
  return rows;
}

class ScoreCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::path(::testing::TempDir()) / ("qkv_score_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write_file_atomic((dir_ / "train.tsv").string(), tsv(make_pairs(400, 1)));
    write_file_atomic((dir_ / "valid.tsv").string(), tsv(make_pairs(20, 2)));
    write_file_atomic((dir_ / "config.json").string(), R"({
      "model_type": "transformer",
      "model": {"d_model": 32, "heads": 2, "enc_layers": 1, "dec_layers": 1, "d_ff": 64, "dropout": 0.1,
                "max_len": 40, "shared_embeddings": true, "tie_output": true, "pre_norm": true},
      "tokenizer": {"kind": "bpe", "vocab_size": 80, "min_frequency": 1, "protect": true},
      "data": {"max_tokens": 400, "max_sentences": 32},
      "optimizer": {"type": "adam", "betas": [0.9, 0.98], "eps": 1e-9},
      "schedule": {"type": "warmup_cosine", "lr": 0.005, "warmup": 20, "total": 200},
      "train": {"max_steps": 200, "save_every": 0, "valid_every": 0},
      "seed": 3
    })");
    tasks::TranslationRun run;
    run.config_path = (dir_ / "config.json").string();
    run.out_dir = (dir_ / "run").string();
    run.train_file = (dir_ / "train.tsv").string();
    run.valid_file = (dir_ / "valid.tsv").string();
    model_ = tasks::train_translation(run).model_dir;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // qkv score --model M args...; stdout's text (the exit code in *code, else expected 0).
  static std::string score(std::vector<std::string> args, int* code = nullptr, const std::string& log = "score.log") {
    args.insert(args.begin(), {"score", "--model", model_});
    const int c = run_qkv(args, dir_ / log, (dir_ / "score.out").string());
    if (code) *code = c;
    else EXPECT_EQ(c, 0) << read_file((dir_ / log).string());
    return read_file((dir_ / "score.out").string());
  }

  static fs::path dir_;
  static std::string model_;
};
fs::path ScoreCli::dir_;
std::string ScoreCli::model_;

TEST_F(ScoreCli, PrintsTheLibrarysScoresInEveryInputForm) {
  const auto pairs = make_pairs(20, 2);
  std::vector<std::string> src, tgt;
  std::string src_text, tgt_text;
  for (auto& [a, b] : pairs) src.push_back(a), tgt.push_back(b), src_text += a + "\n", tgt_text += b + "\n";
  write_file_atomic((dir_ / "src.txt").string(), src_text);
  write_file_atomic((dir_ / "tgt.txt").string(), tgt_text);

  const std::string out = score({"--input", (dir_ / "valid.tsv").string(), "--summary"});
  const std::string log = read_file((dir_ / "score.log").string());
  EXPECT_NE(log.find("20 pairs"), std::string::npos) << log;
  EXPECT_NE(log.find("perplexity"), std::string::npos) << log;
  const auto rows = numbers(out);
  ASSERT_EQ(rows.size(), 20u) << out;

  tasks::ScoreOptions opt;
  opt.token_logprobs = true;
  const tasks::Scores lib = tasks::Translator(model_).score(src, tgt, opt);
  for (size_t i = 0; i < 20; ++i) {
    ASSERT_EQ(rows[i].size(), 1u);
    EXPECT_EQ(rows[i][0], lib.pairs[i].logprob) << i;  // %.17g: the same double
    EXPECT_LT(rows[i][0], 0.0);
  }
  // Again (dropout is off: the same bits), from two files and from stdin.
  EXPECT_EQ(score({"--input", (dir_ / "valid.tsv").string()}), out);
  EXPECT_EQ(score({"--src", (dir_ / "src.txt").string(), "--tgt", (dir_ / "tgt.txt").string()}), out);
  EXPECT_EQ(run_program({"/bin/sh", "-c", qkv_bin() + " score --model '" + model_ + "' < '" +
                                              (dir_ / "valid.tsv").string() + "'"},
                        dir_ / "stdin.log", (dir_ / "stdin.out").string()), 0)
      << read_file((dir_ / "stdin.log").string());
  EXPECT_EQ(read_file((dir_ / "stdin.out").string()), out);

  // --normalize: the mean per target token; --word-scores: each token's, summing to the score.
  const auto norm = numbers(score({"--input", (dir_ / "valid.tsv").string(), "--normalize"}));
  const auto words = numbers(score({"--input", (dir_ / "valid.tsv").string(), "--word-scores"}));
  ASSERT_EQ(norm.size(), 20u);
  ASSERT_EQ(words.size(), 20u);
  for (size_t i = 0; i < 20; ++i) {
    const int64_t n = lib.pairs[i].tokens;
    EXPECT_EQ(norm[i][0], lib.pairs[i].logprob / double(n)) << i;
    ASSERT_EQ(int64_t(words[i].size()), 1 + n) << i;
    double sum = 0;
    for (int64_t k = 1; k <= n; ++k) sum += words[i][size_t(k)];
    EXPECT_EQ(words[i][0], rows[i][0]);
    EXPECT_NEAR(sum, rows[i][0], 1e-12 * std::fabs(rows[i][0]));
  }
}

TEST_F(ScoreCli, SharedSpansAreScoredAsPlaceholdersAsTrainingSawThem) {
  const auto pairs = make_pairs(20, 2);
  std::vector<std::string> src, tgt, wrong_span;
  for (auto& [a, b] : pairs) {
    src.push_back(a);
    tgt.push_back(b);
    wrong_span.push_back(b.substr(0, b.size() - 5) + "qqqqq");  // a span the source does not have
  }
  const tasks::Translator t(model_);
  ASSERT_TRUE(t.bundle().protect_spans);
  io::Seq2SeqBundle raw = t.bundle();
  raw.protect_spans = false;  // the same weights, scoring the spans as text
  const tasks::Translator unprotected(raw);
  const tasks::Scores right = t.score(src, tgt), wrong = t.score(src, wrong_span);
  const tasks::Scores as_text = unprotected.score(src, tgt);
  for (size_t i = 0; i < src.size(); ++i) {
    // The placeholder stands for 5 unseen letters: the model copies it, where it would have to
    // spell the letters token by token (measured: 32 nats apart or more on every pair).
    EXPECT_GT(right.pairs[i].logprob, wrong.pairs[i].logprob + 10) << tgt[i] << " vs " << wrong_span[i];
    EXPECT_GT(right.pairs[i].logprob, as_text.pairs[i].logprob + 10) << tgt[i];
  }
}

TEST_F(ScoreCli, MalformedInputIsAnErrorNamingTheLine) {
  int code = 0;
  write_file_atomic((dir_ / "notab.tsv").string(), "copy alpha --abcde\tkopiere alpha --abcde\ncopy beta\n");
  score({"--input", (dir_ / "notab.tsv").string()}, &code, "notab.log");
  EXPECT_NE(code, 0);
  const std::string notab = read_file((dir_ / "notab.log").string());
  EXPECT_NE(notab.find("notab.tsv: line 2: expected source<TAB>target (one tab), got no tab"), std::string::npos)
      << notab;
  write_file_atomic((dir_ / "utf8.tsv").string(), "copy alpha\tkopiere alpha\ncopy \xff\tkopiere\n");
  score({"--input", (dir_ / "utf8.tsv").string()}, &code, "utf8.log");
  EXPECT_NE(code, 0);
  EXPECT_NE(read_file((dir_ / "utf8.log").string()).find("utf8.tsv: line 2: invalid UTF-8"), std::string::npos)
      << read_file((dir_ / "utf8.log").string());
  write_file_atomic((dir_ / "a.txt").string(), "copy alpha\ncopy beta\n");
  write_file_atomic((dir_ / "b.txt").string(), "kopiere alpha\n");
  score({"--src", (dir_ / "a.txt").string(), "--tgt", (dir_ / "b.txt").string()}, &code, "count.log");
  EXPECT_NE(code, 0);
  EXPECT_NE(read_file((dir_ / "count.log").string()).find("b.txt: has 1 lines but"), std::string::npos)
      << read_file((dir_ / "count.log").string());
  // A target past the model's 40 positions: truncated with a warning naming the pair (scored as
  // the library scores it cut), or, with --on-long refuse, an error naming it.
  std::string longer = "kopiere";
  for (int i = 0; i < 60; ++i) longer += " gamma";
  write_file_atomic((dir_ / "long.tsv").string(), "copy alpha\tkopiere alpha\ncopy gamma\t" + longer + "\n");
  const auto cut = numbers(score({"--input", (dir_ / "long.tsv").string()}, nullptr, "long.log"));
  EXPECT_NE(read_file((dir_ / "long.log").string()).find("warning: pair 2 truncated to 39 tokens a side"),
            std::string::npos)
      << read_file((dir_ / "long.log").string());
  tasks::ScoreOptions quiet;
  quiet.quiet = true;
  const tasks::Scores lib =
      tasks::Translator(model_).score({"copy alpha", "copy gamma"}, {"kopiere alpha", longer}, quiet);
  ASSERT_EQ(cut.size(), 2u);
  EXPECT_EQ(cut[1][0], lib.pairs[1].logprob);
  EXPECT_TRUE(lib.pairs[1].truncated);
  EXPECT_FALSE(lib.pairs[0].truncated);
  score({"--input", (dir_ / "long.tsv").string(), "--on-long", "refuse"}, &code, "refuse.log");
  EXPECT_NE(code, 0);
  EXPECT_NE(read_file((dir_ / "refuse.log").string()).find("pair 2: the target has more than 39 tokens"),
            std::string::npos)
      << read_file((dir_ / "refuse.log").string());
  // --src without --tgt is a usage error (exit 2).
  score({"--src", (dir_ / "a.txt").string()}, &code, "usage.log");
  EXPECT_EQ(code, 2) << read_file((dir_ / "usage.log").string());
}

}  // namespace
