// `qkv train --resume` of a GPT, BERT, tagger, QA or classifier run whose run.json was edited
// after it started: the model (and a classifier's data.max_len and pooling) must say what the
// checkpoint holds. They were ignored: the run went on with the checkpoint's model while run.json
// said another (translation refuses the same since 2d13818, test_train_config_errors.cpp). The
// error names run.json, the field, both values and the checkpoint's config.json; nothing is
// written; the unedited run.json resumes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "lm_corpus.h"
#include "qkv/util/file.h"
#include "run_qkv.h"

namespace fs = std::filesystem;
using qkv::read_file;
using qkv::write_file_atomic;
using qkv::testing::run_qkv;
using qkv::testing::step_dir;

namespace {

// Each run trains 4 steps and keeps a checkpoint at steps 2 and 4; a resume asks for 6.
const char* kTrain = R"("schedule": {"type": "constant", "lr": 0.001},
  "train": {"max_steps": 4, "valid_every": 4, "save_every": 2, "log_every": 4})";

std::string words(std::mt19937& rng, int n) {
  static const std::vector<std::string> w = {"red", "blue", "green", "dog", "cat", "owl", "runs", "sees", "big", "old"};
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? " " : "") + w[rng() % w.size()];
  return s;
}

struct Family {
  const char* name;
  std::string config;                  // the config file's text
  std::string train_file, valid_file;  // under the run's scratch directory
};

// The data files every family reads: documents (GPT, BERT), label<TAB>text (classifiers), word<TAB>tag
// (the tagger) and SQuAD-style JSON lines (QA).
void write_data(const fs::path& dir) {
  qkv::testing::write_lm_corpus(dir, 80, 20, 11);  // train.txt, valid.txt
  std::mt19937 rng(5);
  std::string tsv, conll, qa;
  for (int i = 0; i < 64; ++i) {
    tsv += std::string(i % 2 ? "yes" : "no") + "\t" + words(rng, 3 + int(rng() % 5)) + "\n";
    for (int k = 0; k < 4; ++k) {
      const std::string w = words(rng, 1);
      conll += w + "\t" + (w.size() == 3 ? "B-X" : "O") + "\n";  // three letters: an entity
    }
    conll += "\n";
    const std::string ctx = words(rng, 6);
    qa += nlohmann::json{{"id", "q" + std::to_string(i)}, {"question", "which word ?"}, {"context", ctx},
                         {"answers", {{{"text", ctx.substr(0, ctx.find(' '))}, {"answer_start", 0}}}}}
              .dump() + "\n";
  }
  write_file_atomic((dir / "cls.tsv").string(), tsv);
  write_file_atomic((dir / "tag.conll").string(), conll);
  write_file_atomic((dir / "qa.jsonl").string(), qa);
}

const std::string kBert = R"("model": {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
    "intermediate_size": 32, "max_position_embeddings": 32},
  "tokenizer": {"kind": "wordpiece", "vocab_size": 120, "min_frequency": 1},)";
const std::string kGpt = R"("model": {"n_embd": 16, "n_layer": 1, "n_head": 2, "n_positions": 32},
  "tokenizer": {"vocab_size": 280, "min_frequency": 1},)";

std::vector<Family> families() {
  return {
      {"gpt", "{\"model_type\": \"gpt\", " + kGpt + R"( "data": {"context": 16, "batch_size": 4}, )" + kTrain + "}",
       "train.txt", "valid.txt"},
      {"bert", "{\"model_type\": \"bert\", " + kBert + R"( "data": {"max_len": 32, "batch_size": 4}, )" + kTrain + "}",
       "train.txt", "valid.txt"},
      {"bert_tagger", "{\"model_type\": \"bert_tagger\", " + kBert +
                          R"( "data": {"max_len": 32, "batch_size": 4}, )" + kTrain + "}",
       "tag.conll", "tag.conll"},
      {"bert_qa", "{\"model_type\": \"bert_qa\", " + kBert +
                      R"( "data": {"max_len": 32, "doc_stride": 8, "max_query_len": 8, "batch_size": 4}, )" + kTrain +
                      "}",
       "qa.jsonl", "qa.jsonl"},
      {"gpt_classifier", "{\"model_type\": \"gpt_classifier\", " + kGpt +
                             R"( "data": {"max_len": 24, "batch_size": 4}, )" + kTrain + "}",
       "cls.tsv", "cls.tsv"},
      {"bert_classifier", "{\"model_type\": \"bert_classifier\", " + kBert +
                              R"( "data": {"max_len": 24, "batch_size": 4}, )" + kTrain + "}",
       "cls.tsv", "cls.tsv"},
  };
}

struct Edit {
  std::vector<std::string> path;  // keys under run.json's "config"
  nlohmann::json value;
  std::string want;  // the error after "<run.json>: "
};

std::vector<Edit> edits(const std::string& family) {
  const bool gpt = family.rfind("gpt", 0) == 0;
  std::vector<Edit> out;
  if (gpt) {
    out.push_back({{"model", "n_layer"}, 2, "field 'model.n_layer' is 2 but the checkpoint's ("});
    out.push_back({{"model", "resid_pdrop"}, 0.3, "field 'model.resid_pdrop' is 0.3 but the checkpoint's ("});
  } else {
    out.push_back({{"model", "hidden_size"}, 32, "field 'model.hidden_size' is 32 but the checkpoint's ("});
    out.push_back({{"model", "hidden_dropout_prob"}, 0.3,
                   "field 'model.hidden_dropout_prob' is 0.3 but the checkpoint's ("});
  }
  if (family == "gpt_classifier" || family == "bert_classifier")
    out.push_back({{"data", "max_len"}, 16, "field 'data.max_len' is 16 but the checkpoint's ("});
  if (family == "bert_classifier")
    out.push_back({{"pooling"}, "mean", "field 'pooling' is \"mean\" but the checkpoint's ("});
  return out;
}

}  // namespace

TEST(ResumeEditedRun, EveryFamilyRefusesARunJsonThatNoLongerDescribesItsCheckpoint) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_resume_edited_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_data(dir);
  for (const Family& f : families()) {
    SCOPED_TRACE(f.name);
    const fs::path run = dir / (std::string(f.name) + "_run"), log = dir / (std::string(f.name) + ".log");
    write_file_atomic((dir / "config.json").string(), f.config);
    ASSERT_EQ(run_qkv({"train", "--config", (dir / "config.json").string(), "--train", (dir / f.train_file).string(),
                       "--valid", (dir / f.valid_file).string(), "--out", run.string()},
                      log),
              0)
        << read_file(log.string());
    const std::string run_json = (run / "run.json").string(), original = read_file(run_json);
    for (const Edit& e : edits(f.name)) {
      SCOPED_TRACE(e.want);
      nlohmann::json rj = nlohmann::json::parse(original);
      nlohmann::json* at = &rj["config"];
      for (const std::string& k : e.path) at = &(*at)[k];
      *at = e.value;
      write_file_atomic(run_json, rj.dump(2));
      EXPECT_EQ(run_qkv({"train", "--resume", run.string(), "--max-steps", "6"}, log), 1) << read_file(log.string());
      const std::string text = read_file(log.string());
      EXPECT_NE(text.find(run_json + ": " + e.want), std::string::npos) << text;
      EXPECT_NE(text.find("/config.json) is "), std::string::npos) << text;
      EXPECT_FALSE(fs::exists(step_dir(run, 6)));
    }
    write_file_atomic(run_json, original);
    EXPECT_EQ(run_qkv({"train", "--resume", run.string(), "--max-steps", "6"}, log), 0) << read_file(log.string());
    EXPECT_TRUE(fs::exists(step_dir(run, 6)));
  }
  fs::remove_all(dir);
}
