// `qkv train`: a run killed with SIGKILL and resumed with --resume ends with weights
// byte-identical to an uninterrupted run (same seed, same thread count); SIGTERM saves a
// checkpoint and exits cleanly.
#include <gtest/gtest.h>

#include <cstdio>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "qkv/kernels/bf16.h"
#include "qkv/util/file.h"
#include "reversal_corpus.h"
#include "run_qkv.h"

namespace fs = std::filesystem;

namespace {

using qkv::testing::qkv_bin;
using qkv::testing::spawn;
using qkv::testing::step_dir;
using qkv::testing::wait_exit;
using qkv::testing::wait_for;

// The reversal task (300 training pairs) and a small Transformer config; precision: train.precision.
void write_corpus(const fs::path& dir, const std::string& precision = "fp32") {
  qkv::testing::write_reversal_corpus(dir, 320, 300, 12345);
  qkv::write_file_atomic((dir / "config.json").string(), R"({
    "model_type": "transformer",
    "model": {"d_model": 16, "heads": 2, "enc_layers": 1, "dec_layers": 1, "d_ff": 32, "dropout": 0.1, "max_len": 32,
              "shared_embeddings": true, "tie_output": true},
    "tokenizer": {"kind": "bpe", "vocab_size": 60, "min_frequency": 1},
    "data": {"max_tokens": 64, "max_sentences": 16},
    "optimizer": {"type": "adam", "betas": [0.9, 0.98], "eps": 1e-9},
    "schedule": {"type": "noam", "warmup": 20, "factor": 1.0},
    "train": {"max_steps": 400, "save_every": 10, "valid_every": 0, "keep_last": 100, "precision": "PRECISION"},
    "valid": {"max_sentences": 10},
    "seed": 5
  })");
  std::string config = qkv::read_file((dir / "config.json").string());
  config.replace(config.find("PRECISION"), 9, precision);
  qkv::write_file_atomic((dir / "config.json").string(), config);
}

}  // namespace

// products (bf16 only): QKV_BF16_PRODUCTS for the uninterrupted and the killed run; the resume runs
// with the other value and must still take the killed run's own (recorded in its training state).
static void sigkill_then_resume_is_bit_identical(const std::string& precision, const std::string& products = "") {
  if (!products.empty()) setenv("QKV_BF16_PRODUCTS", products.c_str(), 1);
  fs::path dir =
      fs::path(::testing::TempDir()) / ("qkv_resume_" + precision + products + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_corpus(dir, precision);
  auto args = [&](const std::string& out) {
    return std::vector<std::string>{qkv_bin(), "train", "--config", (dir / "config.json").string(), "--train",
                                    (dir / "train.tsv").string(), "--valid", (dir / "valid.tsv").string(), "--out",
                                    (dir / out).string()};
  };
  ASSERT_EQ(wait_exit(spawn(args("full"), dir / "full.log")), 0) << qkv::read_file((dir / "full.log").string());
  {  // bf16 never slows training silently: the run prints the product speeds it measured and how it
     // runs its bf16 products: as fp32 FMA on rounded operands exactly when native bf16 was the
     // slower (on an Intel Xeon without AMX it is), unless QKV_BF16_PRODUCTS chose.
    const std::string log = qkv::read_file((dir / "full.log").string());
    const size_t at = log.find("qkv train: precision bf16: a 512x1024x1024 product measured ");
    ASSERT_EQ(at != std::string::npos, precision == "bf16") << log;
    if (at != std::string::npos) {
      const std::string line = log.substr(at, log.find('\n', at) - at);
      double b16 = 0, f32 = 0;
      ASSERT_EQ(std::sscanf(line.c_str(), "qkv train: precision bf16: a 512x1024x1024 product measured %lf GFLOP/s "
                                          "against %lf in fp32", &b16, &f32), 2) << line;
      EXPECT_GT(b16, 0) << line;
      EXPECT_GT(f32, 0) << line;
      if (!products.empty()) {
        EXPECT_NE(line.find("; bf16 products: " + products), std::string::npos) << line;
      } else if (b16 != f32) {  // printed rounded: equal figures may hide either order
        EXPECT_NE(line.find(b16 < f32 ? "; bf16 products: fp32_fma" : "; bf16 products: native"), std::string::npos)
            << line;
      }
    }
  }

  pid_t pid = spawn(args("killed"), dir / "killed.log");
  ASSERT_TRUE(wait_for(step_dir(dir / "killed", 50), pid, 600)) << qkv::read_file((dir / "killed.log").string());
  kill(pid, SIGKILL);
  EXPECT_EQ(wait_exit(pid), 128 + SIGKILL);
  ASSERT_FALSE(fs::exists(step_dir(dir / "killed", 400))) << "the run finished before the kill; lengthen it";

  std::vector<std::string> resume{qkv_bin(), "train", "--resume", (dir / "killed").string()};
  if (!products.empty()) setenv("QKV_BF16_PRODUCTS", products == "native" ? "fp32_fma" : "native", 1);
  ASSERT_EQ(wait_exit(spawn(resume, dir / "resume.log")), 0) << qkv::read_file((dir / "resume.log").string());
  const std::string resume_log = qkv::read_file((dir / "resume.log").string());
  EXPECT_NE(resume_log.find("resumed from"), std::string::npos);
  if (!products.empty()) {
    unsetenv("QKV_BF16_PRODUCTS");
    EXPECT_NE(qkv::read_file((dir / "killed.log").string()).find("bf16 products: " + products), std::string::npos);
    EXPECT_NE(resume_log.find("bf16 products: " + products), std::string::npos) << resume_log;
  }

  std::string a = qkv::read_file(step_dir(dir / "full", 400) + "/model.safetensors");
  std::string b = qkv::read_file(step_dir(dir / "killed", 400) + "/model.safetensors");
  EXPECT_EQ(a.size(), b.size());
  EXPECT_TRUE(a == b) << "weights after resume differ from the uninterrupted run";
  std::string sa = qkv::read_file(step_dir(dir / "full", 400) + "/training_state.safetensors");
  std::string sb = qkv::read_file(step_dir(dir / "killed", 400) + "/training_state.safetensors");
  EXPECT_TRUE(sa == sb) << "optimizer/RNG/data state after resume differs";
  EXPECT_NE(qkv::read_file((dir / "killed" / "run.json").string()).find("\"precision\": \"" + precision + "\""),
            std::string::npos)
      << "run.json does not record train.precision";
  fs::remove_all(dir);
}

TEST(TrainResume, SigkillThenResumeIsBitIdentical) { sigkill_then_resume_is_bit_identical("fp32"); }

// Mixed precision (train.precision "bf16") resumes bit-exactly too, with either way of running its
// products (kernels/bf16.h: Bf16Products), whichever the environment asks for at the resume.
TEST(TrainResume, Bf16SigkillThenResumeIsBitIdentical) {
  if (!qkv::kernels::dnnl_cpu_info().bf16_native())
    GTEST_SKIP() << "oneDNN has no bf16 kernel here (" << qkv::kernels::dnnl_cpu_info().isa << ")";
  sigkill_then_resume_is_bit_identical("bf16", "native");
}

TEST(TrainResume, Bf16Fp32FmaSigkillThenResumeIsBitIdentical) {
  if (!qkv::kernels::dnnl_cpu_info().bf16_native())
    GTEST_SKIP() << "oneDNN has no bf16 kernel here (" << qkv::kernels::dnnl_cpu_info().isa << ")";
  sigkill_then_resume_is_bit_identical("bf16", "fp32_fma");
}

// --precision sets a new run's train.precision over its config's (recorded in run.json); a resumed
// run keeps the precision it started with, and asking for another is an error naming the field.
TEST(TrainResume, PrecisionFlagSetsANewRunAndCannotChangeAResumedOne) {
  const bool bf16 = qkv::kernels::dnnl_cpu_info().bf16_native();
  const std::string flag = bf16 ? "bf16" : "fp32", other = bf16 ? "fp32" : "bf16";
  fs::path dir = fs::path(::testing::TempDir()) / ("qkv_precision_flag_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_corpus(dir, other);  // the config asks for the other precision; the flag wins
  const std::vector<std::string> a{"train", "--config", (dir / "config.json").string(), "--train",
                                   (dir / "train.tsv").string(), "--valid", (dir / "valid.tsv").string(), "--out",
                                   (dir / "run").string(), "--max-steps", "20", "--precision", flag};
  ASSERT_EQ(qkv::testing::run_qkv(a, dir / "run.log"), 0) << qkv::read_file((dir / "run.log").string());
  EXPECT_EQ(qkv::read_file((dir / "run.log").string()).find("precision bf16") != std::string::npos, bf16);
  EXPECT_NE(qkv::read_file((dir / "run" / "run.json").string()).find("\"precision\": \"" + flag + "\""),
            std::string::npos);
  const std::string run = (dir / "run").string();
  EXPECT_NE(qkv::testing::run_qkv({"train", "--resume", run, "--precision", other}, dir / "other.log"), 0);
  const std::string err = qkv::read_file((dir / "other.log").string());
  EXPECT_NE(err.find("field 'train.precision': the run started in " + flag), std::string::npos) << err;
  EXPECT_EQ(qkv::testing::run_qkv({"train", "--resume", run, "--precision", flag}, dir / "same.log"), 0)
      << qkv::read_file((dir / "same.log").string());
  EXPECT_NE(qkv::testing::run_qkv({"train", "--resume", run, "--precision", "fp16"}, dir / "bad.log"), 0);
  EXPECT_NE(qkv::read_file((dir / "bad.log").string()).find("fp16"), std::string::npos);
  fs::remove_all(dir);
}

TEST(TrainResume, SigtermSavesACheckpointAndExitsCleanly) {
  fs::path dir = fs::path(::testing::TempDir()) / ("qkv_sigterm_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_corpus(dir);
  std::vector<std::string> a{qkv_bin(), "train", "--config", (dir / "config.json").string(), "--train",
                             (dir / "train.tsv").string(), "--valid", (dir / "valid.tsv").string(), "--out",
                             (dir / "run").string()};
  pid_t pid = spawn(a, dir / "run.log");
  ASSERT_TRUE(wait_for(step_dir(dir / "run", 20), pid, 600)) << qkv::read_file((dir / "run.log").string());
  kill(pid, SIGTERM);
  int code = wait_exit(pid);
  std::string log = qkv::read_file((dir / "run.log").string());
  EXPECT_EQ(code, 130) << log;  // interrupted: checkpoint saved, conventional status for a signal stop
  EXPECT_NE(log.find("interrupted (checkpoint saved)"), std::string::npos) << log;
  EXPECT_TRUE(fs::exists(dir / "run" / "model" / "model.safetensors"));
  fs::remove_all(dir);
}

// A full disk (simulated: the file size limit RLIMIT_FSIZE, `ulimit -f`, makes write() fail with
// EFBIG the way ENOSPC does, without privileges) while saving a checkpoint: the run stops with an
// error naming the checkpoint and the cause, the checkpoints already on disk are untouched and
// load (checksums verified), nothing half-written is left, and --resume after "freeing space"
// ends bit-identical to a run that never failed.
TEST(TrainResume, FailedCheckpointWriteKeepsThePreviousOneAndResumes) {
  fs::path dir = fs::path(::testing::TempDir()) / ("qkv_fulldisk_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_corpus(dir);
  auto train = [&](const std::string& out, int steps) {
    return std::vector<std::string>{qkv_bin(), "train", "--config", (dir / "config.json").string(), "--train",
                                    (dir / "train.tsv").string(), "--valid", (dir / "valid.tsv").string(), "--out",
                                    (dir / out).string(), "--max-steps", std::to_string(steps)};
  };
  ASSERT_EQ(wait_exit(spawn(train("full", 40), dir / "full.log")), 0) << qkv::read_file((dir / "full.log").string());
  ASSERT_EQ(wait_exit(spawn(train("run", 20), dir / "run.log")), 0) << qkv::read_file((dir / "run.log").string());
  const std::string saved = step_dir(dir / "run", 20);
  const std::string model = qkv::read_file(saved + "/model.safetensors");
  const std::string state = qkv::read_file(saved + "/training_state.safetensors");

  // Resume towards step 40 with files limited to half the model's size: the step-30 save fails.
  const std::string limit_kib = std::to_string(model.size() / 2048);
  const std::string resume = qkv_bin() + " train --resume " + (dir / "run").string() + " --max-steps 40";
  pid_t pid = spawn({"/bin/bash", "-c", "ulimit -f " + limit_kib + " && trap '' XFSZ && exec " + resume},
                    dir / "fail.log");
  const int code = wait_exit(pid);
  const std::string log = qkv::read_file((dir / "fail.log").string());
  EXPECT_EQ(code, 1) << log;
  EXPECT_NE(log.find("step-000000030: checkpoint not saved"), std::string::npos) << log;
  EXPECT_NE(log.find("File too large"), std::string::npos) << log;
  EXPECT_NE(log.find("untouched; free space and continue with qkv train --resume"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(step_dir(dir / "run", 30)));
  for (auto& e : fs::recursive_directory_iterator(dir / "run"))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << "left behind: " << e.path();
  EXPECT_EQ(qkv::read_file(saved + "/model.safetensors"), model);
  EXPECT_EQ(qkv::read_file(saved + "/training_state.safetensors"), state);

  // Space freed: the resumed run ends where the uninterrupted one did, to the bit.
  ASSERT_EQ(wait_exit(spawn({qkv_bin(), "train", "--resume", (dir / "run").string(), "--max-steps", "40"},
                            dir / "resume.log")),
            0)
      << qkv::read_file((dir / "resume.log").string());
  EXPECT_TRUE(qkv::read_file(step_dir(dir / "full", 40) + "/model.safetensors") ==
              qkv::read_file(step_dir(dir / "run", 40) + "/model.safetensors"));
  EXPECT_TRUE(qkv::read_file(step_dir(dir / "full", 40) + "/training_state.safetensors") ==
              qkv::read_file(step_dir(dir / "run", 40) + "/training_state.safetensors"));
  // The failed process logged steps past step 20; the resumed one logs them again, once. (The runs'
  // validations differ: the first process ended at step 20, and validated there.)
  auto logged_steps = [](const fs::path& metrics) {
    std::string out, line;
    std::ifstream in(metrics);
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      if (j.at("kind") == "train") out += std::to_string(j.at("step").get<double>()) + "\n";
    }
    return out;
  };
  EXPECT_EQ(logged_steps(dir / "run" / "metrics.jsonl"), logged_steps(dir / "full" / "metrics.jsonl"));
  fs::remove_all(dir);
}

// A new run whose first checkpoint cannot be written has nothing to resume: the error says so
// (not "--resume"), the run takes its directory with it, and the same command runs once space is
// free (it once left a run that --resume refused for want of a checkpoint and --out refused as a run).
TEST(TrainResume, AFailedFirstCheckpointLeavesNothingToResumeAndTheSameCommandRuns) {
  fs::path dir = fs::path(::testing::TempDir()) / ("qkv_firstsave_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_corpus(dir);
  const std::string cmd = qkv_bin() + " train --config " + (dir / "config.json").string() + " --train " +
                          (dir / "train.tsv").string() + " --valid " + (dir / "valid.tsv").string() + " --out " +
                          (dir / "run").string() + " --max-steps 10";
  ASSERT_EQ(wait_exit(spawn({"/bin/bash", "-c", cmd}, dir / "ok.log")), 0) << qkv::read_file((dir / "ok.log").string());
  const auto model_bytes = fs::file_size(step_dir(dir / "run", 10) + "/model.safetensors");
  fs::remove_all(dir / "run");
  const std::string limit_kib = std::to_string(model_bytes / 2048);
  EXPECT_EQ(wait_exit(spawn({"/bin/bash", "-c", "ulimit -f " + limit_kib + " && trap '' XFSZ && exec " + cmd},
                            dir / "fail.log")),
            1);
  const std::string log = qkv::read_file((dir / "fail.log").string());
  EXPECT_NE(log.find("step-000000010: checkpoint not saved"), std::string::npos) << log;
  EXPECT_NE(log.find("saved no checkpoint before this one, so there is nothing to resume"), std::string::npos) << log;
  EXPECT_EQ(log.find("--resume"), std::string::npos) << log;
  EXPECT_NE(log.find("the run failed before its first checkpoint"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(dir / "run"));
  ASSERT_EQ(wait_exit(spawn({"/bin/bash", "-c", cmd}, dir / "again.log")), 0)
      << qkv::read_file((dir / "again.log").string());
  EXPECT_TRUE(fs::exists(step_dir(dir / "run", 10)));
  fs::remove_all(dir);
}

// --resume of a run already at its end trains nothing and writes nothing: it once validated again,
// appending a second metrics line and rewriting the last checkpoint's training state with one more
// validation without progress, so that a later resume to more steps could stop early where the run
// never resumed would not.
TEST(TrainResume, AResumeOfAFinishedRunWritesNothing) {
  fs::path dir = fs::path(::testing::TempDir()) / ("qkv_resume_noop_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_corpus(dir);
  const std::string run = (dir / "run").string();
  ASSERT_EQ(qkv::testing::run_qkv({"train", "--config", (dir / "config.json").string(), "--train",
                                   (dir / "train.tsv").string(), "--valid", (dir / "valid.tsv").string(), "--out",
                                   run, "--max-steps", "20"},
                                  dir / "run.log"),
            0)
      << qkv::read_file((dir / "run.log").string());
  const std::string metrics = qkv::read_file(run + "/metrics.jsonl");
  const std::string state = qkv::read_file(step_dir(dir / "run", 20) + "/training_state.safetensors");
  for (const std::vector<std::string>& extra : {std::vector<std::string>{}, {"--max-steps", "20"}, {"--max-steps", "10"}}) {
    std::vector<std::string> resume{"train", "--resume", run};
    resume.insert(resume.end(), extra.begin(), extra.end());
    ASSERT_EQ(qkv::testing::run_qkv(resume, dir / "resume.log"), 0) << qkv::read_file((dir / "resume.log").string());
    const std::string log = qkv::read_file((dir / "resume.log").string());
    EXPECT_NE(log.find("the run already ends at step 20: nothing trained or written"), std::string::npos) << log;
    EXPECT_EQ(qkv::read_file(run + "/metrics.jsonl"), metrics);
    EXPECT_TRUE(qkv::read_file(step_dir(dir / "run", 20) + "/training_state.safetensors") == state);
  }
  // A checkpoint saved without validation (save_every; or a SIGTERM in the last step) that ends the
  // run is validated by the resume, as the end of the run always was. The resumed run continues
  // from step 10: the lines of the steps after it, which it replaces, are dropped first.
  fs::remove_all(step_dir(dir / "run", 20));
  ASSERT_EQ(qkv::testing::run_qkv({"train", "--resume", run, "--max-steps", "10"}, dir / "resume.log"), 0)
      << qkv::read_file((dir / "resume.log").string());
  const std::string log = qkv::read_file((dir / "resume.log").string());
  EXPECT_EQ(log.find("nothing trained or written"), std::string::npos) << log;
  const std::string after = qkv::read_file(run + "/metrics.jsonl");
  const size_t step11 = metrics.find("\"step\":11.0,");
  ASSERT_NE(step11, std::string::npos) << metrics;
  const std::string through10 = metrics.substr(0, metrics.rfind('\n', step11) + 1);
  ASSERT_EQ(after.substr(0, through10.size()), through10);
  const std::string added = after.substr(through10.size());
  EXPECT_EQ(added.find("\"step\":1"), added.find("\"step\":10.0,")) << added;  // no step 11-20 line
  EXPECT_NE(added.find("\"valid_loss\""), std::string::npos) << added;
  EXPECT_NE(added.find("\"kind\":\"valid\",\"step\":10.0,"), std::string::npos) << added;
  fs::remove_all(dir);
}
