// BERT token classification end to end (tasks/tag_training.h, tasks/tagger.h): `qkv train` with
// model_type bert_tagger trains a tiny BERT from scratch (learned WordPiece vocabulary) on a
// synthetic tagging task that needs context from both sides ("apple" is B-ORG before "corp", O
// otherwise) to high entity F1; `qkv tag` prints word/TAG, CoNLL columns or JSON lines for its
// model/, a sentence longer than the model's positions is tagged in windows (every word gets a
// tag, JSON says how many windows), also with --precision bf16 / int8; `qkv eval-tag` scores it; malformed CoNLL lines and unknown
// labels are errors naming the file, the line and the field; a run stopped at a validation step
// and resumed ends with the same bits (weights and training state) as an uninterrupted one;
// init_from a BertForPreTraining directory reports the classifier newly initialised and the
// pooler and heads ignored, and publishes a BertForTokenClassification directory.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "qkv/io/format/safetensors.h"
#include "qkv/kernels/bf16.h"
#include "qkv/kernels/int8.h"
#include "qkv/util/file.h"
#include "ref.h"
#include "run_qkv.h"

using namespace qkv;
using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kCommon = {"the", "a", "of", "runs", "sees", "big", "small", "and", "with", "to",
                                          "buys", "near", "from", "old", "new"};
const std::vector<std::string> kOrg = {"acme", "globex", "initech", "umbrella", "hooli"};
const std::vector<std::string> kLoc = {"paris", "oslo", "lima", "cairo", "quito"};

// One sentence of `n` items: a LOC word (B-LOC), an ORG name (B-ORG) optionally followed by
// "corp" (I-ORG), "apple corp" (B-ORG I-ORG), a lone "apple" (O: the fruit), or a common word.
void sentence(std::mt19937& rng, int n, std::vector<std::string>& w, std::vector<std::string>& t) {
  for (int i = 0; i < n; ++i) {
    const unsigned r = rng() % 20;
    if (r < 2) {
      w.push_back(kLoc[rng() % kLoc.size()]);
      t.push_back("B-LOC");
    } else if (r < 4) {
      w.push_back(kOrg[rng() % kOrg.size()]);
      t.push_back("B-ORG");
      if (rng() % 2) {
        w.push_back("corp");
        t.push_back("I-ORG");
      }
    } else if (r < 5) {
      w.push_back("apple");
      t.push_back("B-ORG");
      w.push_back("corp");
      t.push_back("I-ORG");
    } else if (r < 6) {
      w.push_back("apple");
      t.push_back("O");
    } else {
      w.push_back(kCommon[rng() % kCommon.size()]);
      t.push_back("O");
    }
  }
}

std::string conll(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string out;
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> w, t;
    sentence(rng, 3 + int(rng() % 10), w, t);
    for (size_t k = 0; k < w.size(); ++k) out += w[k] + "\t" + t[k] + "\n";
    out += "\n";
  }
  return out;
}

const char* kTagConfig = R"({
  "model_type": "bert_tagger",
  "model": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
            "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0},
  "tokenizer": {"kind": "wordpiece", "vocab_size": 300, "min_frequency": 1},
  "data": {"max_len": 16, "batch_size": 16},
  "optimizer": {"type": "adamw", "weight_decay": 0.0},
  "schedule": {"type": "warmup_cosine", "lr": 0.003, "warmup": 20},
  "train": {"max_steps": 1800, "valid_every": 900, "save_every": 900, "log_every": 900},
  "valid": {"max_sentences": 200},
  "seed": 3
})";

std::string read(const fs::path& p) { return read_file(p.string()); }

}  // namespace

TEST(TagCli, TrainsATinyTaggerThenTagsAndScores) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_tag_cli_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_file_atomic((dir / "train.conll").string(), conll(600, 1));
  write_file_atomic((dir / "valid.conll").string(), conll(200, 2));
  write_file_atomic((dir / "test.conll").string(), conll(200, 3));
  write_file_atomic((dir / "config.json").string(), kTagConfig);
  const fs::path run = dir / "run";
  ASSERT_EQ(run_qkv({"train", "--config", (dir / "config.json").string(), "--train", (dir / "train.conll").string(),
                     "--valid", (dir / "valid.conll").string(), "--out", run.string()},
                    dir / "train.log"),
            0)
      << read(dir / "train.log");
  const std::string log = read(dir / "train.log");
  EXPECT_NE(log.find("chunk tags: entity F1"), std::string::npos) << log;
  // The last validation: entity F1 and token accuracy near 1 (the task is deterministic given context).
  double f1 = -1, acc = -1;
  std::istringstream metrics(read(run / "metrics.jsonl"));
  for (std::string line; std::getline(metrics, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("valid_f1")) {
      f1 = j["valid_f1"].get<double>();
      acc = j["valid_accuracy"].get<double>();
    }
  }
  EXPECT_GT(f1, 0.97) << log;
  EXPECT_GT(acc, 0.98) << log;
  const auto cfg = nlohmann::json::parse(read(run / "model" / "config.json"));
  EXPECT_EQ(cfg["architectures"][0], "BertForTokenClassification");
  EXPECT_EQ(cfg["id2label"]["0"], "O");

  const std::string model = (run / "model").string();
  write_file_atomic((dir / "in.txt").string(), "the apple corp buys apple near  paris\n\nhooli corp sees lima\n");
  ASSERT_EQ(run_qkv({"tag", "--model", model, "--input", (dir / "in.txt").string()}, dir / "tag.log",
                    (dir / "tag.out").string()),
            0)
      << read(dir / "tag.log");
  // One line per input line (the blank one answered by a blank line); "apple" is the one word whose tag needs the
  // next word, which a tiny model still gets wrong now and then (validation F1 above says how often).
  const std::string out = read(dir / "tag.out");
  EXPECT_EQ(out.rfind("the/O apple/", 0), 0u) << out;
  EXPECT_NE(out.find(" corp/I-ORG buys/O apple/"), std::string::npos) << out;
  EXPECT_NE(out.find(" near/O paris/B-LOC\n\nhooli/B-ORG corp/I-ORG sees/O lima/B-LOC\n"), std::string::npos) << out;
  ASSERT_EQ(run_qkv({"tag", "--model", model, "--input", (dir / "in.txt").string(), "--conll"}, dir / "tag.log",
                    (dir / "tag.conll").string()),
            0);
  EXPECT_EQ(read(dir / "tag.conll").rfind("the\tO\napple\t", 0), 0u) << read(dir / "tag.conll");
  EXPECT_NE(read(dir / "tag.conll").find("paris\tB-LOC\n\n\nhooli\tB-ORG\n"), std::string::npos)
      << read(dir / "tag.conll");  // the blank input line: a sentence of no words
  // A NUL inside a word is one of the word's bytes: the answer is printed whole, not cut at it.
  const char nul_line[] = "hooli\0x corp sees lima\n";
  write_file_atomic((dir / "nul.txt").string(), std::string(nul_line, sizeof nul_line - 1));
  ASSERT_EQ(run_qkv({"tag", "--model", model, "--input", (dir / "nul.txt").string()}, dir / "tag.log",
                    (dir / "nul.out").string()),
            0)
      << read(dir / "tag.log");
  const std::string nul_out = read(dir / "nul.out");
  EXPECT_EQ(nul_out.rfind(std::string("hooli\0x/", 8), 0), 0u) << nul_out;
  EXPECT_NE(nul_out.find(" sees/O lima/"), std::string::npos) << nul_out;
  ASSERT_EQ(run_qkv({"tag", "--model", model, "--input", (dir / "in.txt").string(), "--json"}, dir / "tag.log",
                    (dir / "tag.json").string()),
            0);
  EXPECT_NE(read(dir / "tag.json").find("\n{\"tags\":[],\"words\":[]}\n"), std::string::npos) << read(dir / "tag.json");

  // A sentence of 120 words: longer than the 16 positions; tagged in windows, every word tagged. The
  // model's 16 positions are all trained (the longer training sentences are windowed too): with 64
  // positions, training sentences of at most ~14 words left positions 16-63 nearly untrained, and a
  // word at position 16 was tagged wrong with 0.995 confidence wherever it stood in the line.
  std::string long_line;
  std::vector<std::string> expect;
  for (int i = 0; i < 40; ++i) {
    long_line += std::string(i ? " " : "") + "acme corp " + kLoc[size_t(i) % kLoc.size()];
    for (const char* t : {"B-ORG", "I-ORG", "B-LOC"}) expect.push_back(t);
  }
  write_file_atomic((dir / "long.txt").string(), long_line + "\n");
  ASSERT_EQ(run_qkv({"tag", "--model", model, "--input", (dir / "long.txt").string(), "--json", "--probs"},
                    dir / "long.log", (dir / "long.out").string()),
            0)
      << read(dir / "long.log");
  const auto j = nlohmann::json::parse(read(dir / "long.out"));
  EXPECT_EQ(j["tags"].get<std::vector<std::string>>(), expect);
  EXPECT_GT(j["windows"].get<int>(), 2);
  EXPECT_EQ(j["probabilities"].size(), 120u);
  EXPECT_NE(read(dir / "long.log").find("long.txt:1: 120 words tagged in"), std::string::npos) << read(dir / "long.log");
  // --precision: the same tags from the weights held in bf16 / int8, where this CPU runs them.
  for (const std::string p : {"bf16", "int8"}) {
    if (p == "bf16" ? !kernels::dnnl_cpu_info().bf16_native() : !kernels::int8_supported()) continue;
    ASSERT_EQ(run_qkv({"tag", "--model", model, "--input", (dir / "long.txt").string(), "--json", "--precision", p},
                      dir / "long.log", (dir / "long.out").string()),
              0)
        << read(dir / "long.log");
    EXPECT_EQ(nlohmann::json::parse(read(dir / "long.out"))["tags"].get<std::vector<std::string>>(), expect) << p;
  }

  ASSERT_EQ(run_qkv({"eval-tag", "--model", model, "--data", (dir / "test.conll").string(), "--json", "--per-type"},
                    dir / "eval.log", (dir / "eval.out").string()),
            0)
      << read(dir / "eval.log");
  const auto e = nlohmann::json::parse(read(dir / "eval.out"));
  EXPECT_EQ(e["sentences"], 200);
  EXPECT_GT(e["accuracy"].get<double>(), 0.98) << e.dump();
  EXPECT_GT(e["f1"].get<double>(), 0.97) << e.dump();
  EXPECT_TRUE(e["per_type"].contains("ORG") && e["per_type"].contains("LOC")) << e.dump();

  // A sentence classifier's head has the same tensor names: its config.json tells them apart (tag
  // and eval-tag used to run one and print a sentence label per word, exiting 0).
  fs::copy(model, dir / "seq", fs::copy_options::recursive);
  auto seq_cfg = nlohmann::json::parse(read(dir / "seq" / "config.json"));
  seq_cfg["architectures"] = {"BertForSequenceClassification"};
  write_file_atomic((dir / "seq" / "config.json").string(), seq_cfg.dump());
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"tag", "--model", (dir / "seq").string(), "--input", (dir / "in.txt").string()},
        std::vector<std::string>{"eval-tag", "--model", (dir / "seq").string(), "--data",
                                 (dir / "test.conll").string()}}) {
    EXPECT_EQ(run_qkv(args, dir / "seq.log"), 1) << args[0];
    EXPECT_NE(read(dir / "seq.log").find("holds a \"BertForSequenceClassification\" model, not a token classifier"),
              std::string::npos)
        << read(dir / "seq.log");
  }
  fs::remove_all(dir);
}

TEST(TagCli, MalformedLinesAndUnknownLabelsNameFileLineAndField) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_tag_cli_err_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_file_atomic((dir / "train.conll").string(), conll(20, 1));
  write_file_atomic((dir / "config.json").string(), kTagConfig);
  auto train = [&](const std::string& valid_text, const std::string& name) {
    write_file_atomic((dir / "valid.conll").string(), valid_text);
    const int rc = run_qkv({"train", "--config", (dir / "config.json").string(), "--train",
                            (dir / "train.conll").string(), "--valid", (dir / "valid.conll").string(), "--out",
                            (dir / name).string(), "--max-steps", "30"},  // more than the warm-up's 20
                           dir / (name + ".log"));
    EXPECT_NE(rc, 0);
    return read(dir / (name + ".log"));
  };
  std::string log = train("the\tO\nacme B-ORG\n", "bad_line");
  EXPECT_NE(log.find("valid.conll:2"), std::string::npos) << log;
  EXPECT_NE(log.find("word<TAB>tag"), std::string::npos) << log;
  log = train("the\tO\n\nbob\tB-PER\n", "unknown_label");
  EXPECT_NE(log.find("valid.conll:3"), std::string::npos) << log;
  EXPECT_NE(log.find("field 'tag'"), std::string::npos) << log;
  EXPECT_NE(log.find("B-PER"), std::string::npos) << log;
  EXPECT_NE(run_qkv({"tag", "--model", (dir / "nothing").string()}, dir / "tag.log"), 0);
  EXPECT_NE(read(dir / "tag.log").find("nothing"), std::string::npos) << read(dir / "tag.log");
  fs::remove_all(dir);
}

TEST(TagCli, AResumedRunEndsBitIdenticalToAnUninterruptedOne) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_tag_cli_resume_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_file_atomic((dir / "train.conll").string(), conll(200, 1));
  write_file_atomic((dir / "valid.conll").string(), conll(50, 2));
  // Dropout on (the generator's state must resume too); the schedule's length fixed in the config.
  auto cfg = nlohmann::json::parse(kTagConfig);
  cfg["model"]["hidden_dropout_prob"] = 0.1;
  cfg["schedule"]["total"] = 40;
  cfg["train"] = {{"max_steps", 40}, {"valid_every", 20}, {"save_every", 20}};
  write_file_atomic((dir / "config.json").string(), cfg.dump());
  auto train = [&](const std::string& out, const std::vector<std::string>& extra) {
    std::vector<std::string> a = {"train", "--config", (dir / "config.json").string(), "--train",
                                  (dir / "train.conll").string(), "--valid", (dir / "valid.conll").string(),
                                  "--out", (dir / out).string()};
    a.insert(a.end(), extra.begin(), extra.end());
    return run_qkv(a, dir / (out + ".log"));
  };
  ASSERT_EQ(train("full", {}), 0) << read(dir / "full.log");
  ASSERT_EQ(train("cut", {"--max-steps", "20"}), 0) << read(dir / "cut.log");  // stops after validating at 20
  ASSERT_EQ(run_qkv({"train", "--resume", (dir / "cut").string(), "--max-steps", "40"}, dir / "resume.log"), 0)
      << read(dir / "resume.log");
  EXPECT_NE(read(dir / "resume.log").find("resumed from"), std::string::npos);
  for (const char* f : {"model.safetensors", "training_state.safetensors"})
    EXPECT_TRUE(read(dir / "full/checkpoints/step-000000040" / f) == read(dir / "cut/checkpoints/step-000000040" / f))
        << f << " after resume differs from the uninterrupted run";
  fs::remove_all(dir);
}

TEST(TagCli, InitFromAPretrainingDirectoryReportsWhatItLoaded) {
  RefFile ref("models_bert");  // tools/refs/models_bert.py: a BertForPreTraining directory, words w0 .. w39
  const std::string pre = (fs::path(ref_dir()) / ref.params("pretraining")["dir"].get<std::string>()).string();
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_tag_cli_init_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::mt19937 rng(5);
  std::string text;
  for (int s = 0; s < 40; ++s) {
    for (int i = 0, n = 2 + int(rng() % 8); i < n; ++i) {
      const unsigned w = rng() % 40;
      text += "w" + std::to_string(w) + (w < 10 ? "\tB-X\n" : "\tO\n");
    }
    text += "\n";
  }
  write_file_atomic((dir / "data.conll").string(), text);
  nlohmann::json cfg = {{"model_type", "bert_tagger"}, {"init_from", pre},
                        {"data", {{"max_len", 16}, {"batch_size", 8}}},
                        {"train", {{"max_steps", 4}, {"valid_every", 4}, {"save_every", 4}}}};
  write_file_atomic((dir / "config.json").string(), cfg.dump());
  const std::vector<std::string> data = {"--train", (dir / "data.conll").string(), "--valid",
                                         (dir / "data.conll").string()};
  std::vector<std::string> args = {"train", "--config", (dir / "config.json").string(), "--out", (dir / "run").string()};
  args.insert(args.end(), data.begin(), data.end());
  ASSERT_EQ(run_qkv(args, dir / "train.log"), 0) << read(dir / "train.log");
  const std::string log = read(dir / "train.log");
  for (const char* line : {"newly initialised: classifier.weight", "newly initialised: classifier.bias",
                           "ignored: bert.pooler.dense.weight", "ignored: cls.seq_relationship.weight",
                           "ignored: cls.predictions.bias"})
    EXPECT_NE(log.find(line), std::string::npos) << line << "\n" << log;
  const auto published = nlohmann::json::parse(read(dir / "run/model/config.json"));
  EXPECT_EQ(published["architectures"][0], "BertForTokenClassification");
  EXPECT_EQ(published["id2label"], (nlohmann::json{{"0", "O"}, {"1", "B-X"}}));
  const auto tensors = safetensors::load((dir / "run/model/model.safetensors").string()).tensors;
  EXPECT_TRUE(tensors.count("classifier.weight") && tensors.count("bert.encoder.layer.1.output.dense.weight"));
  EXPECT_FALSE(tensors.count("bert.pooler.dense.weight") || tensors.count("cls.predictions.bias"));

  // init_from and a model section together: an error naming the config.
  cfg["model"] = {{"hidden_size", 32}};
  write_file_atomic((dir / "config.json").string(), cfg.dump());
  args.back() = (dir / "data.conll").string();
  args[4] = (dir / "run2").string();
  EXPECT_NE(run_qkv(args, dir / "both.log"), 0);
  EXPECT_NE(read(dir / "both.log").find("either init_from"), std::string::npos) << read(dir / "both.log");
  fs::remove_all(dir);
}
