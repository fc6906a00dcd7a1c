// `qkv train` with a GPT config (tasks::train_lm): a tiny GPT learns a synthetic corpus, its
// model/ directory opens in `qkv perplexity` and `qkv generate` (the published GPT-2 layout),
// a run killed with SIGKILL and resumed ends bit-identical to an uninterrupted one, and bad
// config keys are errors naming the key.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lm_corpus.h"
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

const char* kLmConfig = R"({
  "model_type": "gpt",
  "model": {"n_embd": 32, "n_layer": 2, "n_head": 2, "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1},
  "tokenizer": {"kind": "bytebpe", "vocab_size": 300, "min_frequency": 2},
  "data": {"context": 32, "batch_size": 8},
  "optimizer": {"type": "adamw", "lr": 0.003, "weight_decay": 0.01},
  "schedule": {"type": "warmup_cosine", "lr": 0.003, "warmup": 10},
  "train": {"max_steps": 120, "valid_every": 40, "save_every": 10, "keep_last": 100},
  "valid": {"max_tokens": 2048},
  "seed": 3
})";

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::path(::testing::TempDir()) / (name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  qkv::testing::write_lm_corpus(dir, 300, 30, 777);
  qkv::write_file_atomic((dir / "config.json").string(), kLmConfig);
  return dir;
}

std::vector<std::string> lm_train_args(const fs::path& dir, const std::string& config, const std::string& out) {
  return {qkv_bin(), "train", "--config", (dir / config).string(), "--train", (dir / "train.txt").string(),
          "--valid", (dir / "valid.txt").string(), "--out", (dir / out).string()};
}

}  // namespace

TEST(LmTrainCli, TrainsAndPublishesAGpt2Directory) {
  fs::path dir = fresh_dir("qkv_lm_train");
  ASSERT_EQ(wait_exit(spawn(lm_train_args(dir, "config.json", "run"), dir / "train.log")), 0)
      << qkv::read_file((dir / "train.log").string());

  // Validation at steps 40, 80 and the end (120): perplexity falls, best is the lowest.
  auto v = metrics_with(dir / "run", "valid_ppl");
  ASSERT_EQ(v.size(), 3u) << qkv::read_file((dir / "run" / "metrics.jsonl").string());
  EXPECT_LT(v[2]["valid_ppl"].get<double>(), v[0]["valid_ppl"].get<double>());
  EXPECT_NEAR(v[0]["valid_ppl"].get<double>(), std::exp(v[0]["valid_loss"].get<double>()), 1e-9);
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i]["valid_ppl"].get<double>() < v[best]["valid_ppl"].get<double>()) best = i;
  EXPECT_EQ(fs::canonical(dir / "run" / "best"),
            fs::canonical(step_dir(dir / "run", v[best]["step"].get<int>())));
  // 300 tokens, uniform would be 300; the grammar has ~5 choices per word.
  EXPECT_LT(v[best]["valid_ppl"].get<double>(), 12.0);

  // model/ is a GPT-2-layout directory without training state, with the end-of-text id.
  const fs::path model = dir / "run" / "model";
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"}) EXPECT_TRUE(fs::exists(model / f)) << f;
  EXPECT_FALSE(fs::exists(model / "training_state.safetensors"));
  auto cfg = nlohmann::json::parse(qkv::read_file((model / "config.json").string()));
  EXPECT_EQ(cfg["model_type"], "gpt2");
  EXPECT_EQ(cfg["n_positions"], 32);
  EXPECT_TRUE(cfg["eos_token_id"].is_number_integer());

  ASSERT_EQ(run_qkv({"perplexity", "--model", model.string(), "--input", (dir / "valid.txt").string()},
                    dir / "ppl.log", (dir / "ppl.out").string()), 0)
      << qkv::read_file((dir / "ppl.log").string());
  std::string ppl = qkv::read_file((dir / "ppl.out").string());
  auto at = ppl.find("perplexity");
  ASSERT_NE(at, std::string::npos) << ppl;
  double p = std::stod(ppl.substr(at + 10));
  EXPECT_GT(p, 1.0);
  EXPECT_LT(p, 15.0) << ppl;
  // Windows that do not overlap (stride = context 16): the first token of each is context only
  // (Hugging Face's strided evaluation), ceil(N / 16) of the N; the count said "the first".
  ASSERT_EQ(run_qkv({"perplexity", "--model", model.string(), "--input", (dir / "valid.txt").string(), "--context",
                     "16", "--stride", "16"},
                    dir / "ppl.log", (dir / "ppl.out").string()), 0)
      << qkv::read_file((dir / "ppl.log").string());
  long long scored = 0, unscored = 0, all = 0;
  ASSERT_EQ(std::sscanf(qkv::read_file((dir / "ppl.out").string()).c_str(),
                        "tokens %lld (scored; %lld of %lld are context only)", &scored, &unscored, &all), 3)
      << qkv::read_file((dir / "ppl.out").string());
  EXPECT_EQ(scored + unscored, all);
  EXPECT_EQ(unscored, (all + 15) / 16);
  qkv::write_file_atomic((dir / "empty.txt").string(), "");
  EXPECT_EQ(run_qkv({"perplexity", "--model", model.string(), "--input", (dir / "empty.txt").string()},
                    dir / "ppl.log"), 1);
  EXPECT_NE(qkv::read_file((dir / "ppl.log").string()).find((dir / "empty.txt").string() + ": perplexity: the text "
                                                            "has 0 tokens"),
            std::string::npos)
      << qkv::read_file((dir / "ppl.log").string());

  ASSERT_EQ(run_qkv({"generate", "--model", model.string(), "--prompt", "the cat", "-n", "12", "--top-k", "5",
                     "--seed", "1"},
                    dir / "gen.log", (dir / "gen.out").string()), 0)
      << qkv::read_file((dir / "gen.log").string());
  EXPECT_FALSE(qkv::read_file((dir / "gen.out").string()).empty());

  // The same config with --tokenizer: its learning keys are not used, and it says so (they were
  // "unknown key" errors, so no shipped config ran with --tokenizer).
  const std::vector<std::string> again = {"train", "--config", (dir / "config.json").string(), "--train",
                                          (dir / "train.txt").string(), "--valid", (dir / "valid.txt").string(),
                                          "--tokenizer", (model / "tokenizer.json").string(), "--out",
                                          (dir / "run2").string(), "--max-steps", "12"};
  ASSERT_EQ(run_qkv(again, dir / "tok.log"), 0) << qkv::read_file((dir / "tok.log").string());
  EXPECT_NE(qkv::read_file((dir / "tok.log").string())
                .find("warning: tokenizer.kind, tokenizer.vocab_size, tokenizer.min_frequency not used: the tokenizer "
                      "comes from --tokenizer"),
            std::string::npos)
      << qkv::read_file((dir / "tok.log").string());
  fs::remove_all(dir);
}

TEST(LmTrainCli, SigkillThenResumeIsBitIdentical) {
  fs::path dir = fresh_dir("qkv_lm_resume");
  auto cfg = nlohmann::json::parse(kLmConfig);
  cfg["train"]["max_steps"] = 300;  // long enough after the kill at step 50 to be killed mid-run
  qkv::write_file_atomic((dir / "config.json").string(), cfg.dump());
  ASSERT_EQ(wait_exit(spawn(lm_train_args(dir, "config.json", "full"), dir / "full.log")), 0)
      << qkv::read_file((dir / "full.log").string());

  pid_t pid = spawn(lm_train_args(dir, "config.json", "killed"), dir / "killed.log");
  ASSERT_TRUE(wait_for(step_dir(dir / "killed", 50), pid, 600)) << qkv::read_file((dir / "killed.log").string());
  kill(pid, SIGKILL);
  EXPECT_EQ(wait_exit(pid), 128 + SIGKILL);
  ASSERT_FALSE(fs::exists(step_dir(dir / "killed", 300))) << "the run finished before the kill; lengthen it";

  std::vector<std::string> resume{qkv_bin(), "train", "--resume", (dir / "killed").string()};
  ASSERT_EQ(wait_exit(spawn(resume, dir / "resume.log")), 0) << qkv::read_file((dir / "resume.log").string());
  EXPECT_NE(qkv::read_file((dir / "resume.log").string()).find("resumed from"), std::string::npos);

  for (const char* f : {"model.safetensors", "training_state.safetensors"}) {
    std::string a = qkv::read_file(step_dir(dir / "full", 300) + "/" + f);
    std::string b = qkv::read_file(step_dir(dir / "killed", 300) + "/" + f);
    EXPECT_TRUE(a == b) << f << " after resume differs from the uninterrupted run";
  }
  // The validations after the kill score the same weights, so the same perplexities.
  auto vf = metrics_with(dir / "full", "valid_ppl"), vk = metrics_with(dir / "killed", "valid_ppl");
  ASSERT_FALSE(vk.empty());
  EXPECT_EQ(vf.back()["valid_ppl"].get<double>(), vk.back()["valid_ppl"].get<double>());
  fs::remove_all(dir);
}

TEST(LmTrainCli, BadConfigKeysAreNamed) {
  fs::path dir = fresh_dir("qkv_lm_badkey");
  auto base = nlohmann::json::parse(kLmConfig);
  struct Case {
    const char* section;
    const char* key;
  } cases[] = {{"", "optimiser"}, {"model", "n_embdd"}, {"data", "contxt"}, {"tokenizer", "vocab"},
               {"schedule", "warmpu"}, {"train", "max_step"}, {"valid", "max_token"}, {"optimizer", "betas2"}};
  int i = 0;
  for (const Case& c : cases) {
    nlohmann::json cfg = base;
    if (*c.section) cfg[c.section][c.key] = 1;
    else cfg[c.key] = 1;
    const std::string name = "bad" + std::to_string(i++) + ".json";
    qkv::write_file_atomic((dir / name).string(), cfg.dump());
    EXPECT_NE(run_qkv({"train", "--config", (dir / name).string(), "--train", (dir / "train.txt").string(), "--valid",
                       (dir / "valid.txt").string(), "--out", (dir / ("run_" + name)).string()},
                      dir / "bad.log"),
              0);
    std::string log = qkv::read_file((dir / "bad.log").string());
    EXPECT_NE(log.find(c.key), std::string::npos) << c.section << "." << c.key << ": " << log;
    // A mistake in the model or schedule section is found before minutes go into learning a tokenizer.
    if (std::string(c.section) == "model" || std::string(c.section) == "schedule") {
      EXPECT_EQ(log.find("learning"), std::string::npos) << log;
    }
  }
  // So is a model section that parses but cannot be built (n_embd not a multiple of n_head).
  nlohmann::json cfg = base;
  cfg["model"]["n_head"] = 3;
  qkv::write_file_atomic((dir / "heads.json").string(), cfg.dump());
  EXPECT_NE(run_qkv({"train", "--config", (dir / "heads.json").string(), "--train", (dir / "train.txt").string(),
                     "--valid", (dir / "valid.txt").string(), "--out", (dir / "run_heads").string()},
                    dir / "bad.log"),
            0);
  const std::string log = qkv::read_file((dir / "bad.log").string());
  EXPECT_NE(log.find("section 'model': GptConfig: n_embd must be a positive multiple of n_head"), std::string::npos)
      << log;
  EXPECT_EQ(log.find("learning"), std::string::npos) << log;

  // Sizes that would allocate without end (a layer at a time: n_layer 2^32 + 1 grew by 90 MB/s with
  // no error) or past the machine's memory are refused by name, before anything is learned.
  struct Size {
    const char* section;
    nlohmann::json values;
    const char* want;
  } sizes[] = {
      {"model", {{"n_layer", 4294967297LL}}, "GptConfig: n_layer must be in [1, 1024], got 4294967297"},
      {"model", {{"n_positions", 4294967297LL}}, "GptConfig: n_positions must be in [1, 1048576], got 4294967297"},
      {"model", {{"vocab_size", 100000000}}, "GptConfig: vocab_size must be in [1, 16777216], got 100000000"},
      {"model", {{"n_embd", 65536}, {"n_head", 2}, {"n_layer", 1000}}, "million parameters"},
      {"data", {{"context", 4294967297LL}},
       "field 'data.context': expected an integer in [2, 1048576], got 4294967297"},
      {"data", {{"batch_size", 4294967297LL}}, "field 'data.batch_size': expected an integer in [1, 1048576]"},
      // a negative count was read as 0, "all of them"
      {"valid", {{"max_tokens", -5}}, "field 'valid.max_tokens': expected an integer in [0, 9223372036854775807], got -5"},
      // a context past the position table, found before BPE (it was found after)
      {"model", {{"n_positions", 8}}, "field 'data.context': 32 is longer than model.n_positions 8"},
  };
  for (const Size& c : sizes) {
    nlohmann::json big = base;
    for (const auto& [k, v] : c.values.items()) big[c.section][k] = v;
    qkv::write_file_atomic((dir / "size.json").string(), big.dump());
    EXPECT_EQ(run_qkv({"train", "--config", (dir / "size.json").string(), "--train", (dir / "train.txt").string(),
                       "--valid", (dir / "valid.txt").string(), "--out", (dir / "run_size").string()},
                      dir / "bad.log"),
              1);
    const std::string got = qkv::read_file((dir / "bad.log").string());
    EXPECT_NE(got.find(c.want), std::string::npos) << got;
    EXPECT_EQ(got.find("learning"), std::string::npos) << got;
    EXPECT_FALSE(fs::exists(dir / "run_size")) << "a run that failed before its first step leaves no directory";
  }
  fs::remove_all(dir);
}

// A held-out file shorter than one window is named (the message named only PackedLmStream).
TEST(LmTrainCli, AFileShorterThanOneWindowIsNamed) {
  fs::path dir = fresh_dir("qkv_lm_short");
  qkv::write_file_atomic((dir / "short.txt").string(), "the cat\n");
  EXPECT_EQ(run_qkv({"train", "--config", (dir / "config.json").string(), "--train", (dir / "train.txt").string(),
                     "--valid", (dir / "short.txt").string(), "--out", (dir / "run").string()},
                    dir / "log"),
            1);
  const std::string log = qkv::read_file((dir / "log").string());
  EXPECT_NE(log.find((dir / "short.txt").string() + ": holds "), std::string::npos) << log;
  EXPECT_NE(log.find("fewer than one window of data.context + 1 = 33"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(dir / "run"));
  fs::remove_all(dir);
}
