// `qkv train` with a BERT config (tasks::train_bert): a tiny BERT pretrains with MLM + NSP on a
// synthetic corpus, validation reports MLM/NSP accuracy, a run killed with SIGKILL and resumed
// ends bit-identical to an uninterrupted one, and model/ loads with io::load_bert with both heads.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>
#include <vector>

#include "lm_corpus.h"
#include "qkv/io/bert.h"
#include "qkv/util/file.h"
#include "run_qkv.h"

namespace fs = std::filesystem;

namespace {

using qkv::testing::qkv_bin;
using qkv::testing::metrics_with;
using qkv::testing::run_qkv;
using qkv::testing::spawn;
using qkv::testing::step_dir;
using qkv::testing::wait_exit;
using qkv::testing::wait_for;

const char* kConfig = R"({
  "model_type": "bert",
  "model": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64},
  "tokenizer": {"kind": "wordpiece", "vocab_size": 120, "min_frequency": 2},
  "data": {"max_len": 32, "batch_size": 8},
  "optimizer": {"type": "adamw", "weight_decay": 0.01},
  "schedule": {"type": "warmup_cosine", "lr": 0.003, "warmup": 10},
  "train": {"max_steps": 600, "valid_every": 200, "save_every": 10, "keep_last": 100},
  "valid": {"max_pairs": 64},
  "seed": 5
})";

std::vector<std::string> pretrain_args(const fs::path& dir, const std::string& out) {
  return {qkv_bin(), "train", "--config", (dir / "config.json").string(), "--train", (dir / "train.txt").string(),
          "--valid", (dir / "valid.txt").string(), "--out", (dir / out).string()};
}

}  // namespace

TEST(BertPretrainCli, SigkillThenResumeIsBitIdenticalAndModelLoads) {
  fs::path dir = fs::path(::testing::TempDir()) / ("qkv_bert_pretrain_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  qkv::testing::write_lm_corpus(dir, 300, 40, 99);
  qkv::write_file_atomic((dir / "config.json").string(), kConfig);

  ASSERT_EQ(wait_exit(spawn(pretrain_args(dir, "full"), dir / "full.log")), 0)
      << qkv::read_file((dir / "full.log").string());
  pid_t pid = spawn(pretrain_args(dir, "killed"), dir / "killed.log");
  ASSERT_TRUE(wait_for(step_dir(dir / "killed", 30), pid, 600)) << qkv::read_file((dir / "killed.log").string());
  kill(pid, SIGKILL);
  EXPECT_EQ(wait_exit(pid), 128 + SIGKILL);
  ASSERT_FALSE(fs::exists(step_dir(dir / "killed", 600))) << "the run finished before the kill; lengthen it";
  std::vector<std::string> resume{qkv_bin(), "train", "--resume", (dir / "killed").string()};
  ASSERT_EQ(wait_exit(spawn(resume, dir / "resume.log")), 0) << qkv::read_file((dir / "resume.log").string());
  EXPECT_NE(qkv::read_file((dir / "resume.log").string()).find("resumed from"), std::string::npos);
  for (const char* f : {"model.safetensors", "training_state.safetensors"}) {
    std::string a = qkv::read_file(step_dir(dir / "full", 600) + "/" + f);
    std::string b = qkv::read_file(step_dir(dir / "killed", 600) + "/" + f);
    EXPECT_TRUE(a == b) << f << " after resume differs from the uninterrupted run";
  }

  // Validation at 200, 400, 600: the MLM loss falls, and ends far below uniform guessing
  // (ln V nats: the synthetic grammar draws each word among 5, so a small fraction of that is
  // the best possible); accuracies are fractions.
  auto v = metrics_with(dir / "full", "valid_mlm_acc"), vk = metrics_with(dir / "killed", "valid_mlm_acc");
  ASSERT_EQ(v.size(), 3u) << qkv::read_file((dir / "full" / "metrics.jsonl").string());
  ASSERT_FALSE(vk.empty());
  EXPECT_EQ(v.back()["valid_mlm_loss"].get<double>(), vk.back()["valid_mlm_loss"].get<double>());
  EXPECT_LT(v.back()["valid_mlm_loss"].get<double>(), v.front()["valid_mlm_loss"].get<double>());
  const int64_t vocab = nlohmann::json::parse(qkv::read_file((dir / "full" / "model" / "config.json").string()))["vocab_size"];
  EXPECT_LT(v.back()["valid_mlm_loss"].get<double>(), 0.75 * std::log(double(vocab)));
  EXPECT_GT(v.back()["valid_mlm_acc"].get<double>(), 5.0 / double(vocab));
  const double nsp = v.back()["valid_nsp_acc"].get<double>();
  EXPECT_GE(nsp, 0.0);
  EXPECT_LE(nsp, 1.0);

  // model/: the Hugging Face BertForPreTraining layout, both heads loaded, nothing initialised.
  const fs::path model = dir / "full" / "model";
  EXPECT_FALSE(fs::exists(model / "training_state.safetensors"));
  auto cfg = nlohmann::json::parse(qkv::read_file((model / "config.json").string()));
  EXPECT_EQ(cfg["architectures"][0], "BertForPreTraining");
  qkv::io::BertBundle b = qkv::io::load_bert(model.string(), {true, true});
  ASSERT_TRUE(b.mlm && b.nsp && b.tokenizer);
  EXPECT_TRUE(b.report.initialised.empty()) << b.report.summary();
  bool has_nsp = false, has_mlm = false;
  for (const auto& n : b.report.loaded) {
    has_nsp |= n.rfind("cls.seq_relationship.", 0) == 0;
    has_mlm |= n.rfind("cls.predictions.", 0) == 0;
  }
  EXPECT_TRUE(has_nsp && has_mlm) << b.report.summary();
  if (!HasFailure()) fs::remove_all(dir);  // kept for inspection otherwise
}

// A mistake in the model section (a key BertConfig does not have, hidden_size not a multiple of
// the heads) is an error naming the config and the key, found before a WordPiece vocabulary is
// learned (which takes minutes on a real corpus).
TEST(BertPretrainCli, ModelSectionMistakesAreNamedBeforeTheVocabularyIsLearned) {
  fs::path dir = fs::path(::testing::TempDir()) / ("qkv_bert_badmodel_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  qkv::testing::write_lm_corpus(dir, 50, 10, 11);
  const auto base = nlohmann::json::parse(kConfig);
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* expected;
  } cases[] = {{"hidden_sise", 32, "hidden_sise"},
               {"num_attention_heads", 3, "hidden_size must be a positive multiple of num_attention_heads"},
               // Sizes that would allocate until memory runs out, and values the task cannot use.
               {"num_hidden_layers", 2147483647, "num_hidden_layers must be in [1, 1024], got 2147483647"},
               {"max_position_embeddings", 300000000, "max_position_embeddings must be in [1, 1048576]"},
               {"type_vocab_size", 1, "'model.type_vocab_size': next-sentence prediction needs 2 segment types"},
               {"pad_token_id", -1, "pad_token_id must be >= 0, got -1"}};
  for (const Case& c : cases) {
    nlohmann::json cfg = base;
    cfg["model"][c.key] = c.value;
    const fs::path config = dir / (std::string(c.key) + ".json");
    qkv::write_file_atomic(config.string(), cfg.dump());
    EXPECT_NE(run_qkv({"train", "--config", config.string(), "--train", (dir / "train.txt").string(), "--valid",
                       (dir / "valid.txt").string(), "--out", (dir / (std::string("run_") + c.key)).string()},
                      dir / "bad.log"),
              0);
    const std::string log = qkv::read_file((dir / "bad.log").string());
    EXPECT_NE(log.find(config.string()), std::string::npos) << log;
    EXPECT_TRUE(log.find("section 'model'") != std::string::npos || log.find("'model.") != std::string::npos) << log;
    EXPECT_NE(log.find(c.expected), std::string::npos) << log;
    EXPECT_EQ(log.find("learning"), std::string::npos) << log;
  }
  // A data.max_len past the position table, and a negative valid.max_pairs (read as 0, "all"), are
  // named before the vocabulary is learned too.
  for (const auto& [section, key, value, expected] :
       std::vector<std::tuple<const char*, const char*, int, const char*>>{
           {"model", "max_position_embeddings", 8, "field 'data.max_len': 32 is longer than model.max_position_embeddings 8"},
           {"valid", "max_pairs", -5, "field 'valid.max_pairs': expected an integer in [0, 9223372036854775807], got -5"}}) {
    nlohmann::json cfg = base;
    cfg[section][key] = value;
    const fs::path config = dir / "late.json";
    qkv::write_file_atomic(config.string(), cfg.dump());
    EXPECT_EQ(run_qkv({"train", "--config", config.string(), "--train", (dir / "train.txt").string(), "--valid",
                       (dir / "valid.txt").string(), "--out", (dir / "run_late").string()},
                      dir / "bad.log"),
              1);
    const std::string log = qkv::read_file((dir / "bad.log").string());
    EXPECT_NE(log.find(config.string() + ": " + expected), std::string::npos) << log;
    EXPECT_EQ(log.find("learning"), std::string::npos) << log;
  }
  // A tokenizer without [CLS] (a GPT's), and a validation file of one document, are named (the
  // errors named neither).
  const std::string config = (dir / "base.json").string(), tok = (dir / "gpt_tok.json").string();
  qkv::write_file_atomic(config, base.dump());
  ASSERT_EQ(run_qkv({"train-tokenizer", "--kind", "bytebpe", "--vocab-size", "300", "-i", (dir / "train.txt").string(),
                     "-o", tok},
                    dir / "tok.log"),
            0);
  EXPECT_EQ(run_qkv({"train", "--config", config, "--train", (dir / "train.txt").string(), "--valid",
                     (dir / "valid.txt").string(), "--out", (dir / "run_tok").string(), "--tokenizer", tok},
                    dir / "bad.log"),
            1);
  EXPECT_NE(qkv::read_file((dir / "bad.log").string()).find(tok + ": has no [CLS] token"), std::string::npos)
      << qkv::read_file((dir / "bad.log").string());
  qkv::write_file_atomic((dir / "one_doc.txt").string(), "a single document of a few words\n");
  EXPECT_EQ(run_qkv({"train", "--config", config, "--train", (dir / "train.txt").string(), "--valid",
                     (dir / "one_doc.txt").string(), "--out", (dir / "run_one").string()},
                    dir / "bad.log"),
            1);
  EXPECT_NE(qkv::read_file((dir / "bad.log").string()).find((dir / "one_doc.txt").string() + ": make_nsp_pairs: NSP "
                                                            "needs at least two"),
            std::string::npos)
      << qkv::read_file((dir / "bad.log").string());
  if (!HasFailure()) fs::remove_all(dir);
}
