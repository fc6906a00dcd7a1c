// GPT fine-tuning for classification end to end (tasks/cls_training.h, tasks/classifier.h):
// `qkv train` with model_type gpt_classifier fine-tunes a tiny GPT (no pretraining) on synthetic
// separable tasks, single texts and pairs, and reaches high validation accuracy; `qkv classify`
// prints label<TAB>probability (or JSON lines) for its model/; `qkv eval-classify` scores it;
// batched answers equal one-at-a-time ones (padding does not reach the [EXTRACT] state); an
// interrupted run resumed from its checkpoint ends with the same bits as an uninterrupted one;
// malformed input lines are errors naming the line.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <set>
#include <sstream>

#include "qkv/io/bert_cls.h"
#include "qkv/io/gpt2.h"
#include "qkv/tasks/classifier.h"
#include "qkv/text/char_word.h"
#include "qkv/util/file.h"
#include "run_qkv.h"

using namespace qkv;
using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kFruit = {"apple", "banana", "cherry", "grape", "lemon", "mango", "peach", "plum"};
const std::vector<std::string> kAnimal = {"dog", "cat", "horse", "sheep", "goat", "mouse", "tiger", "zebra"};

std::string words(const std::vector<std::string>& from, std::mt19937& rng, int lo, int hi) {
  const int n = lo + int(rng() % unsigned(hi - lo + 1));
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? " " : "") + from[rng() % from.size()];
  return s;
}

// Single texts: label "fruit" or "animal" by the words' group. Pairs: "same" when both texts
// come from one group, else "different".
std::string synthetic(bool pairs, int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string out;
  for (int i = 0; i < n; ++i) {
    const bool x = rng() % 2, y = rng() % 2;
    if (!pairs) {
      out += std::string(x ? "fruit" : "animal") + "\t" + words(x ? kFruit : kAnimal, rng, 1, 12) + "\n";
    } else {
      out += std::string(x == y ? "same" : "different") + "\t" + words(x ? kFruit : kAnimal, rng, 1, 6) + "\t" +
             words(y ? kFruit : kAnimal, rng, 1, 6) + "\n";
    }
  }
  return out;
}

const char* kClassifyConfig = R"({
  "model_type": "gpt_classifier",
  "model": {"n_positions": 32, "n_embd": 32, "n_layer": 2, "n_head": 2,
            "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0},
  "tokenizer": {"vocab_size": 300, "min_frequency": 1},
  "lm_weight": 0.5,
  "data": {"max_len": 24, "batch_size": 16},
  "optimizer": {"type": "adamw", "lr": 0.003, "weight_decay": 0.0},
  "schedule": {"type": "constant", "lr": 0.003},
  "train": {"max_steps": STEPS, "valid_every": 50, "save_every": 20, "log_every": 50},
  "seed": 3
})";

// The same tasks for a small BERT from scratch (WordPiece learned from the training texts).
// Dropout stays on: the resume test then also checks that the dropout stream resumes exactly.
const char* kBertConfig = R"({
  "model_type": "bert_classifier",
  "model": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
            "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1},
  "tokenizer": {"vocab_size": 100, "min_frequency": 1},
  "data": {"max_len": 24, "batch_size": 16},
  "optimizer": {"type": "adamw", "lr": 0.003, "weight_decay": 0.0},
  "schedule": {"type": "constant", "lr": 0.003},
  "train": {"max_steps": STEPS, "valid_every": 50, "save_every": 20, "log_every": 50},
  "seed": 3
})";

struct ClsRun {
  fs::path dir, model;
};

ClsRun train_run(const std::string& name, bool pairs, int steps, const char* config = kClassifyConfig) {
  ClsRun r;
  r.dir = fs::path(::testing::TempDir()) / ("qkv_classify_cli_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(r.dir);
  fs::create_directories(r.dir);
  write_file_atomic((r.dir / "train.tsv").string(), synthetic(pairs, 400, 1));
  write_file_atomic((r.dir / "valid.tsv").string(), synthetic(pairs, 60, 2));
  std::string cfg = config;
  cfg.replace(cfg.find("STEPS"), 5, std::to_string(steps));
  write_file_atomic((r.dir / "config.json").string(), cfg);
  const int code = run_qkv({"train", "--config", (r.dir / "config.json").string(), "--train",
                            (r.dir / "train.tsv").string(), "--valid", (r.dir / "valid.tsv").string(), "--out",
                            (r.dir / "run").string()},
                           r.dir / "train.log");
  const std::string log = read_file((r.dir / "train.log").string());
  EXPECT_EQ(code, 0) << log;
  // The progress line counts what the loss averages over: examples, not tokens.
  EXPECT_NE(log.find(" seq/s "), std::string::npos) << log;
  EXPECT_EQ(log.find(" tok/s "), std::string::npos) << log;
  r.model = r.dir / "run" / "model";
  return r;
}

double eval_accuracy(const ClsRun& r, const std::string& data) {
  const int code = run_qkv({"eval-classify", "--model", r.model.string(), "--data", data, "--json"},
                           r.dir / "eval.log", (r.dir / "eval.out").string());
  EXPECT_EQ(code, 0) << read_file((r.dir / "eval.log").string());
  return nlohmann::json::parse(read_file((r.dir / "eval.out").string())).at("accuracy").get<double>();
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

}  // namespace

TEST(ClassifyCli, FineTunesSingleTextsAndClassifiesBatchedAsOneAtATime) {
  const ClsRun r = train_run("single", false, 150);
  ASSERT_TRUE(fs::exists(r.model / "model.safetensors"));
  ASSERT_TRUE(fs::exists(r.model / "tokenizer.json"));
  const std::string valid = (r.dir / "valid.tsv").string();
  EXPECT_GE(eval_accuracy(r, valid), 0.95);
  {  // Gold labels the model does not know are each a class of their own in the macro average
     // (scikit-learn's: over the labels in gold or predictions); they were merged into one.
    const std::vector<std::pair<std::string, std::string>> rows = {
        {"fruit", "apple banana"}, {"animal", "dog cat"}, {"foo", "cherry grape"}, {"bar", "horse sheep"},
        {"baz", "lemon mango"}};
    std::string tsv;
    std::vector<tasks::ClsInput> texts;
    for (const auto& [gold, text] : rows) tsv += gold + "\t" + text + "\n", texts.push_back({text, "", false});
    write_file_atomic((r.dir / "unknown.tsv").string(), tsv);
    std::vector<std::string> pred;
    for (const auto& c : tasks::Classifier(r.model.string()).classify(texts, {})) pred.push_back(c.label);
    std::set<std::string> labels;
    for (size_t i = 0; i < rows.size(); ++i) labels.insert(rows[i].first), labels.insert(pred[i]);
    double f1_sum = 0;
    for (const std::string& l : labels) {
      double tp = 0, fp = 0, fn = 0;
      for (size_t i = 0; i < rows.size(); ++i) {
        const bool g = rows[i].first == l, p = pred[i] == l;
        tp += g && p, fp += !g && p, fn += g && !p;
      }
      const double prec = tp + fp > 0 ? tp / (tp + fp) : 0, rec = tp + fn > 0 ? tp / (tp + fn) : 0;
      f1_sum += prec + rec > 0 ? 2 * prec * rec / (prec + rec) : 0;
    }
    ASSERT_EQ(run_qkv({"eval-classify", "--model", r.model.string(), "--data", (r.dir / "unknown.tsv").string(),
                       "--json"},
                      r.dir / "eval.log", (r.dir / "eval.out").string()),
              0)
        << read_file((r.dir / "eval.log").string());
    const auto j = nlohmann::json::parse(read_file((r.dir / "eval.out").string()));
    EXPECT_NEAR(j.at("macro_f1").get<double>(), f1_sum / double(labels.size()), 1e-12) << j.dump();
    EXPECT_EQ(j.at("unknown_gold_labels"), 3);
  }

  // qkv classify: one answer per input line -> label<TAB>probability; the blank line is the empty
  // text (its label is whatever the model says), so answers line up with lines.
  write_file_atomic((r.dir / "in.txt").string(), "apple banana cherry\n\ndog cat\nmango\nzebra tiger horse goat\n");
  ASSERT_EQ(run_qkv({"classify", "--model", r.model.string(), "--input", (r.dir / "in.txt").string()},
                    r.dir / "c.log", (r.dir / "c.out").string()), 0) << read_file((r.dir / "c.log").string());
  auto out = lines_of(read_file((r.dir / "c.out").string()));
  ASSERT_EQ(out.size(), 5u);
  const std::vector<std::string> want = {"fruit", "", "animal", "fruit", "animal"};  // "": any label
  for (size_t i = 0; i < 5; ++i) {
    auto tab = out[i].find('\t');
    ASSERT_NE(tab, std::string::npos) << out[i];
    if (want[i].empty()) continue;
    EXPECT_EQ(out[i].substr(0, tab), want[i]);
    const double p = std::stod(out[i].substr(tab + 1));
    EXPECT_GT(p, 0.5);
    EXPECT_LE(p, 1.0);
  }
  // The same from stdin, as JSON lines with every label's probability.
  ASSERT_EQ(run_program({"/bin/sh", "-c", qkv_bin() + " classify --model '" + r.model.string() +
                                             "' --json --all-probs < '" + (r.dir / "in.txt").string() + "'"},
                        r.dir / "j.log", (r.dir / "j.out").string()), 0) << read_file((r.dir / "j.log").string());
  auto js = lines_of(read_file((r.dir / "j.out").string()));
  ASSERT_EQ(js.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    auto j = nlohmann::json::parse(js[i]);
    if (!want[i].empty()) {
      EXPECT_EQ(j.at("label"), want[i]);
    }
    const double pf = j.at("probabilities").at("fruit"), pa = j.at("probabilities").at("animal");
    EXPECT_NEAR(pf + pa, 1.0, 1e-12);
    EXPECT_DOUBLE_EQ(j.at("probability").get<double>(), std::max(pf, pa));
  }

  // Batched (right-padded, lengths 2 .. 14 tokens together) equals one input at a time.
  tasks::Classifier clf(r.model.string());
  std::vector<tasks::ClsInput> inputs;
  for (auto& l : lines_of(read_file(valid))) inputs.push_back({l.substr(l.find('\t') + 1), "", false});
  tasks::ClassifyOptions batched;
  batched.batch_size = 64;
  batched.all_probabilities = true;
  auto all = clf.classify(inputs, batched);
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto one = clf.classify({inputs[i]}, batched)[0];
    EXPECT_EQ(one.label, all[i].label) << i;
    for (size_t c = 0; c < one.probabilities.size(); ++c)
      EXPECT_NEAR(one.probabilities[c], all[i].probabilities[c], 1e-5 * std::max(1.0, one.probabilities[c])) << i;
  }

  // An input longer than max_len (24 tokens) is classified cut to it, and stderr names its line;
  // --all-probs prints nothing without --json, so alone it is a usage error.
  std::string long_line = "apple";
  for (int i = 0; i < 40; ++i) long_line += " banana";
  write_file_atomic((r.dir / "long.txt").string(), "mango\n" + long_line + "\n");
  ASSERT_EQ(run_qkv({"classify", "--model", r.model.string(), "--input", (r.dir / "long.txt").string()},
                    r.dir / "long.log", (r.dir / "long.out").string()), 0);
  const std::string long_log = read_file((r.dir / "long.log").string());
  EXPECT_NE(long_log.find("warning: " + (r.dir / "long.txt").string() + ":2: input truncated to 24 tokens"),
            std::string::npos) << long_log;
  EXPECT_EQ(long_log.find(":1: input truncated"), std::string::npos) << long_log;
  EXPECT_NE(run_qkv({"classify", "--model", r.model.string(), "--all-probs", "--input", (r.dir / "long.txt").string()},
                    r.dir / "ap.log"), 0);
  EXPECT_NE(read_file((r.dir / "ap.log").string()).find("--json"), std::string::npos);

  // A single-text model given a pair line, and invalid UTF-8: errors naming the line.
  write_file_atomic((r.dir / "bad1.txt").string(), "apple\ndog\tcat\n");
  EXPECT_NE(run_qkv({"classify", "--model", r.model.string(), "--input", (r.dir / "bad1.txt").string()},
                    r.dir / "bad1.log"), 0);
  EXPECT_NE(read_file((r.dir / "bad1.log").string()).find("bad1.txt:2"), std::string::npos)
      << read_file((r.dir / "bad1.log").string());
  write_file_atomic((r.dir / "bad2.txt").string(), "apple\n\nplum\nbad \xff\xfe byte\n");
  EXPECT_NE(run_qkv({"classify", "--model", r.model.string(), "--input", (r.dir / "bad2.txt").string()},
                    r.dir / "bad2.log"), 0);
  const std::string log2 = read_file((r.dir / "bad2.log").string());
  EXPECT_NE(log2.find("bad2.txt:4"), std::string::npos) << log2;
  EXPECT_NE(log2.find("UTF-8"), std::string::npos) << log2;
}

// valid.max_examples: 0 validates on every example (it once kept none: a NaN loss), N on N of them.
TEST(ClassifyCli, ValidMaxExamplesZeroKeepsEveryExampleAndNKeepsN) {
  for (const auto& [max, want] : {std::pair{0, 60}, std::pair{25, 25}}) {
    std::string cfg = kClassifyConfig;
    cfg.insert(cfg.find("\"seed\""), "\"valid\": {\"max_examples\": " + std::to_string(max) + "},\n  ");
    const ClsRun r = train_run("valid_max_" + std::to_string(max), false, 2, cfg.c_str());
    const std::string log = read_file((r.dir / "train.log").string());
    EXPECT_NE(log.find("400 training and " + std::to_string(want) + " validation examples"), std::string::npos)
        << log;
    EXPECT_EQ(log.find("nan"), std::string::npos) << log;
  }
}

// train.average_last: the published model is the mean of the last checkpoints, as for every other
// run (a classifier's copied best/ and ignored the key).
TEST(ClassifyCli, AverageLastPublishesTheMeanOfTheLastCheckpoints) {
  std::string cfg = kClassifyConfig;
  cfg.replace(cfg.find("\"save_every\": 20"), 16, "\"save_every\": 2, \"keep_last\": 3, \"average_last\": 3");
  const ClsRun r = train_run("average_last", false, 6, cfg.c_str());
  const std::string log = read_file((r.dir / "train.log").string());
  EXPECT_NE(log.find("is the average of the last 3 checkpoints (step-000000002 .. step-000000006)"),
            std::string::npos)
      << log;
  EXPECT_NE(read_file((r.model / "model.safetensors").string()),
            read_file((r.dir / "run" / "best" / "model.safetensors").string()));
}

TEST(ClassifyCli, FineTunesPairsAndRefusesLinesWithoutTwoFields) {
  const ClsRun r = train_run("pairs", true, 200);
  EXPECT_GE(eval_accuracy(r, (r.dir / "valid.tsv").string()), 0.9);
  write_file_atomic((r.dir / "in.txt").string(), "apple plum\tcherry\ndog\tlemon mango\ntiger\tzebra goat\n");
  ASSERT_EQ(run_qkv({"classify", "--model", r.model.string(), "--input", (r.dir / "in.txt").string()},
                    r.dir / "c.log", (r.dir / "c.out").string()), 0) << read_file((r.dir / "c.log").string());
  auto out = lines_of(read_file((r.dir / "c.out").string()));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].substr(0, out[0].find('\t')), "same");
  EXPECT_EQ(out[1].substr(0, out[1].find('\t')), "different");
  EXPECT_EQ(out[2].substr(0, out[2].find('\t')), "same");

  // Batched pairs equal one at a time.
  tasks::Classifier clf(r.model.string());
  EXPECT_TRUE(clf.pairs());
  std::vector<tasks::ClsInput> inputs;
  for (auto& l : lines_of(read_file((r.dir / "valid.tsv").string()))) {
    auto t1 = l.find('\t'), t2 = l.find('\t', t1 + 1);
    inputs.push_back({l.substr(t1 + 1, t2 - t1 - 1), l.substr(t2 + 1), true});
  }
  auto all = clf.classify(inputs, {64, false});
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto one = clf.classify({inputs[i]})[0];
    EXPECT_EQ(one.label, all[i].label) << i;
    EXPECT_NEAR(one.probability, all[i].probability, 1e-5) << i;
  }

  write_file_atomic((r.dir / "bad.txt").string(), "apple\tplum\ncherry only\n");
  EXPECT_NE(run_qkv({"classify", "--model", r.model.string(), "--input", (r.dir / "bad.txt").string()},
                    r.dir / "bad.log"), 0);
  const std::string log = read_file((r.dir / "bad.log").string());
  EXPECT_NE(log.find("bad.txt:2"), std::string::npos) << log;
  EXPECT_NE(log.find("2 tab-separated fields"), std::string::npos) << log;
}

namespace {
// A run of `config` stopped at step 20 and resumed to 40 ends with the weights of the same run
// trained to 40 without a stop.
void expect_resume_matches_straight_run(const std::string& name, const char* config) {
  const ClsRun straight = train_run(name + "_straight", false, 40, config);
  const fs::path split = fs::path(::testing::TempDir()) / ("qkv_classify_cli_" + name + "_split_" +
                                                           std::to_string(::getpid()));
  fs::remove_all(split);
  fs::create_directories(split);
  for (auto f : {"train.tsv", "valid.tsv", "config.json"}) fs::copy_file(straight.dir / f, split / f);
  ASSERT_EQ(run_qkv({"train", "--config", (split / "config.json").string(), "--train", (split / "train.tsv").string(),
                     "--valid", (split / "valid.tsv").string(), "--out", (split / "run").string(), "--max-steps", "20"},
                    split / "a.log"), 0) << read_file((split / "a.log").string());
  ASSERT_EQ(run_qkv({"train", "--resume", (split / "run").string(), "--max-steps", "40"}, split / "b.log"), 0)
      << read_file((split / "b.log").string());
  EXPECT_NE(read_file((split / "b.log").string()).find("resumed"), std::string::npos);
  const std::string ck = "checkpoints/step-000000040/model.safetensors";
  ASSERT_TRUE(fs::exists(straight.dir / "run" / ck));
  EXPECT_TRUE(read_file((straight.dir / "run" / ck).string()) == read_file((split / "run" / ck).string()))
      << name << ": the resumed run's weights differ from the uninterrupted run's";
}
}  // namespace

TEST(ClassifyCli, ResumedRunEndsWithTheSameBits) { expect_resume_matches_straight_run("gpt", kClassifyConfig); }

TEST(ClassifyCli, FineTunesFromAPretrainedDirectoryGrowingItsVocabulary) {
  // A "pretrained" GPT-2-layout directory: random weights, a character tokenizer of 30 symbols.
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_classify_cli_init_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<std::string> vocab = {"<unk>", " "};
  for (char c = 'a'; c <= 'z'; ++c) vocab.push_back(std::string(1, c));
  vocab.push_back("-");
  vocab.push_back(".");
  io::GptBundle init;
  init.config.vocab_size = 30;
  init.config.n_positions = 96;
  init.config.n_embd = 32;
  init.config.n_layer = 2;
  init.config.n_head = 2;
  init.model = std::make_shared<models::Gpt>(init.config);
  init.tokenizer = std::make_shared<text::VocabTokenizer>(text::VocabTokenizer::Level::Char, vocab, "<unk>");
  io::save_gpt2((dir / "init").string(), init);
  write_file_atomic((dir / "train.tsv").string(), synthetic(false, 300, 1));
  write_file_atomic((dir / "valid.tsv").string(), synthetic(false, 40, 2));
  write_file_atomic((dir / "config.json").string(),
                    R"({"model_type": "gpt_classifier", "init_from": ")" + (dir / "init").string() + R"(",
                        "special_tokens": {"start": "<s>", "delim": "<d>", "extract": "<e>"},
                        "data": {"max_len": 64, "batch_size": 16},
                        "optimizer": {"type": "adamw", "lr": 0.003, "weight_decay": 0.0},
                        "train": {"max_steps": 80, "valid_every": 40, "save_every": 40}})");
  ASSERT_EQ(run_qkv({"train", "--config", (dir / "config.json").string(), "--train", (dir / "train.tsv").string(),
                     "--valid", (dir / "valid.tsv").string(), "--out", (dir / "run").string()},
                    dir / "train.log"), 0) << read_file((dir / "train.log").string());
  const io::GptClassifierBundle b = io::load_gpt2_classifier((dir / "run" / "model").string());
  EXPECT_EQ(b.model->transformer->config().vocab_size, 33);  // 30 + <s> <d> <e>
  EXPECT_EQ(b.model->transformer->config().n_positions, 96);
  EXPECT_EQ(b.max_len, 64);
  EXPECT_EQ(b.tokenizer->require_special_id(text::Role::Start), 30);
  EXPECT_EQ(b.tokenizer->require_special_id(text::Role::Extract), 32);
  EXPECT_EQ(b.labels, (std::vector<std::string>{"animal", "fruit"}));
  ClsRun r{dir, dir / "run" / "model"};
  EXPECT_GE(eval_accuracy(r, (dir / "valid.tsv").string()), 0.9);
}

// ---------------------------------------------------------------- BERT (model_type bert_classifier)

TEST(ClassifyCli, BertFineTunesSingleTextsAndPairsAndClassifies) {
  const ClsRun r = train_run("bert_single", false, 150, kBertConfig);
  const nlohmann::json cfg = nlohmann::json::parse(read_file((r.model / "config.json").string()));
  EXPECT_EQ(cfg.at("architectures"), nlohmann::json::array({"BertForSequenceClassification"}));
  EXPECT_EQ(cfg.at("id2label"), (nlohmann::json{{"0", "animal"}, {"1", "fruit"}}));
  ASSERT_TRUE(fs::exists(r.model / "vocab.txt"));
  EXPECT_GE(eval_accuracy(r, (r.dir / "valid.tsv").string()), 0.95);
  write_file_atomic((r.dir / "in.txt").string(), "apple banana cherry\n\ndog cat\nmango\nzebra tiger horse goat\n");
  ASSERT_EQ(run_qkv({"classify", "--model", r.model.string(), "--input", (r.dir / "in.txt").string()},
                    r.dir / "c.log", (r.dir / "c.out").string()), 0) << read_file((r.dir / "c.log").string());
  auto out = lines_of(read_file((r.dir / "c.out").string()));
  ASSERT_EQ(out.size(), 5u);  // the blank line is the empty text: an answer of its own
  const std::vector<std::string> want = {"fruit", "", "animal", "fruit", "animal"};
  for (size_t i = 0; i < 5; ++i) {
    if (!want[i].empty()) {
      EXPECT_EQ(out[i].substr(0, out[i].find('\t')), want[i]) << out[i];
    }
  }

  // Batched (right-padded) equals one input at a time: padding reaches neither [CLS] nor the pooler.
  tasks::Classifier clf(r.model.string());
  EXPECT_EQ(clf.family(), tasks::ClassifierFamily::bert);
  std::vector<tasks::ClsInput> inputs;
  for (auto& l : lines_of(read_file((r.dir / "valid.tsv").string())))
    inputs.push_back({l.substr(l.find('\t') + 1), "", false});
  auto all = clf.classify(inputs, {64, false});
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto one = clf.classify({inputs[i]})[0];
    EXPECT_EQ(one.label, all[i].label) << i;
    EXPECT_NEAR(one.probability, all[i].probability, 1e-5) << i;
  }

  const ClsRun p = train_run("bert_pairs", true, 250, kBertConfig);
  EXPECT_GE(eval_accuracy(p, (p.dir / "valid.tsv").string()), 0.9);
  write_file_atomic((p.dir / "in.txt").string(), "apple plum\tcherry\ndog\tlemon mango\ntiger\tzebra goat\n");
  ASSERT_EQ(run_qkv({"classify", "--model", p.model.string(), "--input", (p.dir / "in.txt").string()},
                    p.dir / "c.log", (p.dir / "c.out").string()), 0) << read_file((p.dir / "c.log").string());
  out = lines_of(read_file((p.dir / "c.out").string()));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].substr(0, out[0].find('\t')), "same");
  EXPECT_EQ(out[1].substr(0, out[1].find('\t')), "different");
  EXPECT_EQ(out[2].substr(0, out[2].find('\t')), "same");
  // A single text for the pair model: an error naming the line.
  write_file_atomic((p.dir / "bad.txt").string(), "apple\tplum\ncherry only\n");
  EXPECT_NE(run_qkv({"classify", "--model", p.model.string(), "--input", (p.dir / "bad.txt").string()},
                    p.dir / "bad.log"), 0);
  EXPECT_NE(read_file((p.dir / "bad.log").string()).find("bad.txt:2"), std::string::npos);
}

TEST(ClassifyCli, BertResumedRunEndsWithTheSameBits) { expect_resume_matches_straight_run("bert", kBertConfig); }

TEST(ClassifyCli, BertFineTunesFromAPretrainingDirectoryReportingTheNewHead) {
  // A BertForPreTraining directory as `qkv train`'s BERT pretraining writes it: random weights,
  // a WordPiece vocabulary of the synthetic words.
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_classify_cli_bert_init_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  for (auto& w : kFruit) vocab += w + "\n";
  for (auto& w : kAnimal) vocab += w + "\n";
  write_file_atomic((dir / "vocab.txt").string(), vocab);
  models::BertConfig bc;
  bc.vocab_size = 21;
  bc.hidden_size = 32;
  bc.num_hidden_layers = 2;
  bc.num_attention_heads = 2;
  bc.intermediate_size = 64;
  bc.max_position_embeddings = 64;
  io::BertBundle pre = io::make_bert(bc, {true, true});
  pre.tokenizer = text::load_tokenizer((dir / "vocab.txt").string());
  io::save_bert((dir / "init").string(), pre);
  write_file_atomic((dir / "train.tsv").string(), synthetic(false, 300, 1));
  write_file_atomic((dir / "valid.tsv").string(), synthetic(false, 40, 2));
  write_file_atomic((dir / "config.json").string(),
                    R"({"model_type": "bert_classifier", "init_from": ")" + (dir / "init").string() + R"(",
                        "num_labels": 2, "classifier_dropout": 0.2,
                        "data": {"max_len": 32, "batch_size": 16},
                        "optimizer": {"type": "adamw", "lr": 0.001, "weight_decay": 0.0},
                        "train": {"max_steps": 80, "valid_every": 40, "save_every": 40}})");
  ASSERT_EQ(run_qkv({"train", "--config", (dir / "config.json").string(), "--train", (dir / "train.tsv").string(),
                     "--valid", (dir / "valid.tsv").string(), "--out", (dir / "run").string()},
                    dir / "train.log"), 0) << read_file((dir / "train.log").string());
  const std::string log = read_file((dir / "train.log").string());
  EXPECT_NE(log.find("newly initialised: classifier.weight"), std::string::npos) << log;
  EXPECT_NE(log.find("ignored: cls.seq_relationship.weight"), std::string::npos) << log;
  EXPECT_NE(log.find("ignored: cls.predictions.bias"), std::string::npos) << log;
  const io::BertClassifierBundle b = io::load_bert_classifier((dir / "run" / "model").string());
  EXPECT_EQ(b.model->bert->config().vocab_size, 21);
  EXPECT_EQ(b.model->bert->config().max_position_embeddings, 64);
  EXPECT_EQ(b.max_len, 32);
  EXPECT_DOUBLE_EQ(b.model->dropout->p, 0.2);
  EXPECT_EQ(b.labels, (std::vector<std::string>{"animal", "fruit"}));
  ClsRun r{dir, dir / "run" / "model"};
  EXPECT_GE(eval_accuracy(r, (dir / "valid.tsv").string()), 0.9);
}

TEST(ClassifyCli, BertConfigErrorsNameTheFileAndTheField) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_classify_cli_bert_err_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_file_atomic((dir / "train.tsv").string(), synthetic(false, 50, 1));
  write_file_atomic((dir / "valid.tsv").string(), synthetic(false, 10, 2));
  auto fails_with = [&](const std::string& name, const std::string& cfg, std::initializer_list<const char*> parts) {
    const fs::path c = dir / (name + ".json");
    write_file_atomic(c.string(), cfg);
    EXPECT_NE(run_qkv({"train", "--config", c.string(), "--train", (dir / "train.tsv").string(), "--valid",
                       (dir / "valid.tsv").string(), "--out", (dir / ("run_" + name)).string()},
                      dir / (name + ".log")), 0) << name;
    const std::string log = read_file((dir / (name + ".log")).string());
    for (const char* p : parts) EXPECT_NE(log.find(p), std::string::npos) << "'" << p << "' not in: " << log;
  };
  fails_with("num_labels", R"({"model_type": "bert_classifier", "num_labels": 3, "model": {"hidden_size": 32,
             "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}})",
             {"num_labels.json", "num_labels", "2 distinct labels"});
  fails_with("lm_weight", R"({"model_type": "bert_classifier", "lm_weight": 0.5})", {"lm_weight.json", "lm_weight"});
  fails_with("pooling", R"({"model_type": "bert_classifier", "pooling": "max"})", {"pooling.json", "pooling", "max"});
  fails_with("model_key", R"({"model_type": "bert_classifier", "model": {"hidden_sise": 32}})",
             {"model_key.json", "hidden_sise"});
  // Values that were taken silently: a negative rate read as "not given", and examples cut to the
  // model's 4 positions without a word.
  {  // one label in the training file: named by the file (the message named only the model class)
    std::string one;
    for (int i = 0; i < 20; ++i) one += "animal\tdog cat\n";
    write_file_atomic((dir / "one.tsv").string(), one);
    write_file_atomic((dir / "one.json").string(), R"({"model_type": "bert_classifier"})");
    EXPECT_EQ(run_qkv({"train", "--config", (dir / "one.json").string(), "--train", (dir / "one.tsv").string(),
                       "--valid", (dir / "valid.tsv").string(), "--out", (dir / "run_one").string()},
                      dir / "one.log"),
              1);
    const std::string log = read_file((dir / "one.log").string());
    EXPECT_NE(log.find((dir / "one.tsv").string() + ": holds 1 distinct label: a classifier needs at least 2"),
              std::string::npos)
        << log;
  }
  fails_with("dropout", R"({"model_type": "bert_classifier", "classifier_dropout": -0.5})",
             {"dropout.json", "classifier_dropout", "expected a rate in [0, 1), got -0.5"});
  fails_with("positions", R"({"model_type": "gpt_classifier", "model": {"n_positions": 4, "n_embd": 16, "n_layer": 1,
             "n_head": 2}, "data": {"max_len": 32}})",
             {"positions.json", "field 'data.max_len': 32 is longer than model.n_positions 4"});
  fails_with("bert_positions", R"({"model_type": "bert_classifier", "model": {"max_position_embeddings": 8,
             "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2}, "data": {"max_len": 32}})",
             {"bert_positions.json", "field 'data.max_len': 32 is longer than model.max_position_embeddings 8"});
  // Found after the tokenizer was learned (or at the first step), naming no field:
  fails_with("names", R"({"model_type": "gpt_classifier", "special_tokens": {"start": "X", "delim": "X"}})",
             {"names.json: section 'special_tokens': start, delim and extract must be three different non-empty "
              "tokens, got 'X', 'X', '[EXTRACT]'"});
  fails_with("tiny_len", R"({"model_type": "bert_classifier", "data": {"max_len": 2}})",
             {"tiny_len.json: field 'data.max_len': expected 0 (the model's positions) or at least 3"});
  {  // a validation label the training file lacks: named by its line (it was "example 3"), before learning
    write_file_atomic((dir / "odd_valid.tsv").string(), "fruit\tapple\n\n\n\nanimal\tdog\nneutral\tmeh\n");
    write_file_atomic((dir / "odd.json").string(), R"({"model_type": "bert_classifier"})");
    EXPECT_EQ(run_qkv({"train", "--config", (dir / "odd.json").string(), "--train", (dir / "train.tsv").string(),
                       "--valid", (dir / "odd_valid.tsv").string(), "--out", (dir / "run_odd").string()},
                      dir / "odd.log"),
              1);
    const std::string log = read_file((dir / "odd.log").string());
    EXPECT_NE(log.find((dir / "odd_valid.tsv").string() + ":6: label 'neutral' does not occur in the training set"),
              std::string::npos)
        << log;
    EXPECT_EQ(log.find("learning"), std::string::npos) << log;
  }
  {  // pairs for a model with one segment type
    write_file_atomic((dir / "pairs.tsv").string(), synthetic(true, 50, 1));
    write_file_atomic((dir / "segments.json").string(), R"({"model_type": "bert_classifier", "model": {
        "type_vocab_size": 1, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2}})");
    EXPECT_EQ(run_qkv({"train", "--config", (dir / "segments.json").string(), "--train", (dir / "pairs.tsv").string(),
                       "--valid", (dir / "pairs.tsv").string(), "--out", (dir / "run_segments").string()},
                      dir / "segments.log"),
              1);
    const std::string log = read_file((dir / "segments.log").string());
    EXPECT_NE(log.find("segments.json: field 'model.type_vocab_size': the sentence pairs of the training file need 2 "
                       "segment types (a and b), got 1"),
              std::string::npos)
        << log;
    EXPECT_EQ(log.find("learning"), std::string::npos) << log;
  }
}

// A new run that fails in its first step (here a non-finite loss: the auxiliary LM loss weighted
// by 1e308) takes its directory with it: it used to leave run.json and an empty metrics.jsonl,
// so that the fixed command met "already holds a run" and --resume "no checkpoint".
TEST(ClassifyCli, ARunThatFailsInItsFirstStepLeavesNoDirectory) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_classify_cli_step1_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_file_atomic((dir / "train.tsv").string(), synthetic(false, 50, 1));
  write_file_atomic((dir / "valid.tsv").string(), synthetic(false, 10, 2));
  std::string text = kClassifyConfig;
  text.replace(text.find("STEPS"), 5, "2");
  nlohmann::json cfg = nlohmann::json::parse(text);
  cfg["lm_weight"] = 1e308;
  write_file_atomic((dir / "bad.json").string(), cfg.dump());
  const std::vector<std::string> args = {"--train", (dir / "train.tsv").string(), "--valid",
                                         (dir / "valid.tsv").string(), "--out", (dir / "run").string()};
  auto train = [&](const std::string& config) {
    std::vector<std::string> a = {"train", "--config", config};
    a.insert(a.end(), args.begin(), args.end());
    return run_qkv(a, dir / "train.log");
  };
  EXPECT_EQ(train((dir / "bad.json").string()), 1);
  const std::string log = read_file((dir / "train.log").string());
  EXPECT_NE(log.find("step 1: non-finite loss"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(dir / "run")) << log;
  cfg["lm_weight"] = 0.5;
  write_file_atomic((dir / "good.json").string(), cfg.dump());
  EXPECT_EQ(train((dir / "good.json").string()), 0) << read_file((dir / "train.log").string());
  if (!HasFailure()) fs::remove_all(dir);
}
