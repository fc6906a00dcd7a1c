// `train.average_last` and `qkv average`: a run's published model is the element-wise mean of its
// last N checkpoints (computed here from the checkpoint files, in double, rounded once), `qkv
// average --run` writes the same bytes, the averaged model translates, and a bad N is refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "qkv/io/format/safetensors.h"
#include "qkv/util/file.h"
#include "reversal_corpus.h"
#include "run_qkv.h"

namespace fs = std::filesystem;
using qkv::testing::qkv_bin;
using qkv::testing::spawn;
using qkv::testing::step_dir;
using qkv::testing::wait_exit;

namespace {

void write_config(const fs::path& dir, int keep_last, int average_last, int max_steps = 40) {
  qkv::write_file_atomic((dir / "config.json").string(), R"({
    "model_type": "transformer",
    "model": {"d_model": 16, "heads": 2, "enc_layers": 1, "dec_layers": 1, "d_ff": 32, "dropout": 0.1, "max_len": 32,
              "shared_embeddings": true, "tie_output": true},
    "tokenizer": {"kind": "bpe", "vocab_size": 60, "min_frequency": 1},
    "data": {"max_tokens": 64, "max_sentences": 16},
    "schedule": {"type": "noam", "warmup": 20, "factor": 1.0},
    "train": {"max_steps": )" + std::to_string(max_steps) + R"(, "save_every": 10, "valid_every": 0, "keep_last": )" +
                                                            std::to_string(keep_last) + R"(, "average_last": )" +
                                                            std::to_string(average_last) + R"(},
    "valid": {"max_sentences": 10},
    "seed": 3
  })");
}

std::vector<std::string> train_args(const fs::path& dir, const std::string& out) {
  return {qkv_bin(), "train", "--config", (dir / "config.json").string(), "--train", (dir / "train.tsv").string(),
          "--valid", (dir / "valid.tsv").string(), "--out", (dir / out).string()};
}

}  // namespace

TEST(AverageCli, RunModelIsTheMeanOfTheLastCheckpoints) {
  fs::path dir = fs::path(::testing::TempDir()) / ("qkv_average_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  qkv::testing::write_reversal_corpus(dir, 120, 100, 777);
  write_config(dir, 3, 3);
  ASSERT_EQ(wait_exit(spawn(train_args(dir, "run"), dir / "run.log")), 0) << qkv::read_file((dir / "run.log").string());
  const std::string log = qkv::read_file((dir / "run.log").string());
  EXPECT_NE(log.find("average of the last 3 checkpoints"), std::string::npos) << log;
  EXPECT_NE(log.find(" tok/s "), std::string::npos) << log;  // translation's rate is target tokens

  auto model = qkv::safetensors::load((dir / "run/model/model.safetensors").string());
  std::vector<qkv::safetensors::Contents> ckpts;
  for (int step : {20, 30, 40}) ckpts.push_back(qkv::safetensors::load(step_dir(dir / "run", step) + "/model.safetensors"));
  ASSERT_FALSE(model.tensors.empty());
  size_t differing_from_last = 0;
  for (const auto& [name, t] : model.tensors) {
    ASSERT_EQ(t.dtype(), qkv::DType::f32) << name;
    std::vector<float> got = t.to_vector<float>();
    std::vector<std::vector<float>> c;
    for (const auto& ck : ckpts) c.push_back(ck.tensors.at(name).to_vector<float>());
    for (size_t i = 0; i < got.size(); ++i) {
      const float want = float((double(c[0][i]) + double(c[1][i]) + double(c[2][i])) / 3.0);
      ASSERT_EQ(got[i], want) << name << "[" << i << "]";
      differing_from_last += got[i] != c[2][i];
    }
  }
  EXPECT_GT(differing_from_last, 0u) << "the average equals the last checkpoint: nothing was averaged";
  EXPECT_FALSE(fs::exists(dir / "run/model/training_state.safetensors"));

  // The command does the same by hand, to the byte.
  std::vector<std::string> avg{qkv_bin(), "average", "--run", (dir / "run").string(), "--last", "3", "--out",
                               (dir / "by_hand").string()};
  ASSERT_EQ(wait_exit(spawn(avg, dir / "avg.log")), 0) << qkv::read_file((dir / "avg.log").string());
  EXPECT_TRUE(qkv::read_file((dir / "by_hand/model.safetensors").string()) ==
              qkv::read_file((dir / "run/model/model.safetensors").string()));

  // --out never deletes what the user had there: a non-empty directory needs --force, and one of the
  // checkpoints being read is refused outright.
  fs::create_directories(dir / "precious");
  qkv::write_file_atomic((dir / "precious/notes.txt").string(), "keep me");
  std::vector<std::string> into = avg;
  into.back() = (dir / "precious").string();
  EXPECT_EQ(wait_exit(spawn(into, dir / "avg.log")), 1);
  EXPECT_NE(qkv::read_file((dir / "avg.log").string()).find("--out exists and is not empty"), std::string::npos)
      << qkv::read_file((dir / "avg.log").string());
  EXPECT_EQ(qkv::read_file((dir / "precious/notes.txt").string()), "keep me");
  into.back() = step_dir(dir / "run", 40);
  EXPECT_EQ(wait_exit(spawn(into, dir / "avg.log")), 1);
  EXPECT_NE(qkv::read_file((dir / "avg.log").string()).find("is one of the checkpoints being averaged"),
            std::string::npos)
      << qkv::read_file((dir / "avg.log").string());
  EXPECT_TRUE(fs::exists(step_dir(dir / "run", 40) + "/training_state.safetensors"));
  // ... nor, with --force, a directory that holds one (it once replaced the whole run).
  std::vector<std::string> over_run = into;
  over_run.back() = (dir / "run").string();
  over_run.push_back("--force");
  EXPECT_EQ(wait_exit(spawn(over_run, dir / "avg.log")), 1);
  EXPECT_NE(qkv::read_file((dir / "avg.log").string()).find("--out holds one of the checkpoints being averaged"),
            std::string::npos)
      << qkv::read_file((dir / "avg.log").string());
  EXPECT_TRUE(fs::exists(step_dir(dir / "run", 40) + "/training_state.safetensors"));
  // "--out DIR/" is DIR (it failed to move the temporary, which it had put inside DIR, and left it).
  std::vector<std::string> slash = avg;
  slash.back() = (dir / "slash").string() + "/";
  ASSERT_EQ(wait_exit(spawn(slash, dir / "avg.log")), 0) << qkv::read_file((dir / "avg.log").string());
  EXPECT_TRUE(qkv::read_file((dir / "slash/model.safetensors").string()) ==
              qkv::read_file((dir / "by_hand/model.safetensors").string()));
  for (const auto& e : fs::directory_iterator(dir / "slash"))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  // "." and ".." name no directory to replace (the working directory could not be moved aside, and
  // the averaged model was left beside it as ..tmp.PID).
  for (const char* dots : {".", "..", "../"}) {
    // run from inside dir/slash: sh -c 'cd DIR && exec "$0" "$@"' qkv average ...
    std::vector<std::string> here{"/bin/sh", "-c", "cd '" + (dir / "slash").string() + "' && exec \"$0\" \"$@\""};
    here.insert(here.end(), avg.begin(), avg.end());
    here.back() = dots;
    here.push_back("--force");
    EXPECT_EQ(qkv::testing::run_program(here, dir / "avg.log"), 1) << dots;
    EXPECT_NE(qkv::read_file((dir / "avg.log").string()).find("--out: name a directory, not '" + std::string(dots)),
              std::string::npos)
        << qkv::read_file((dir / "avg.log").string());
  }
  for (const fs::path& d : {dir, dir / "slash"})
    for (const auto& e : fs::directory_iterator(d))
      EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  into.back() = (dir / "precious").string();
  into.push_back("--force");
  EXPECT_EQ(wait_exit(spawn(into, dir / "avg.log")), 0) << qkv::read_file((dir / "avg.log").string());
  EXPECT_FALSE(fs::exists(dir / "precious/notes.txt"));
  EXPECT_TRUE(fs::exists(dir / "precious/model.safetensors"));

  // The averaged directory is a model qkv translates with.
  qkv::write_file_atomic((dir / "in.txt").string(), "a b c\n");
  std::vector<std::string> tr{qkv_bin(), "translate", "--model", (dir / "by_hand").string(), "--input",
                              (dir / "in.txt").string(), "--output", (dir / "out.txt").string()};
  EXPECT_EQ(wait_exit(spawn(tr, dir / "translate.log")), 0) << qkv::read_file((dir / "translate.log").string());
  fs::remove_all(dir);
}

TEST(AverageCli, AverageLastBeyondKeepLastIsRefused) {
  fs::path dir = fs::path(::testing::TempDir()) / ("qkv_average_bad_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  qkv::testing::write_reversal_corpus(dir, 120, 100, 777);
  write_config(dir, 2, 3);
  EXPECT_NE(wait_exit(spawn(train_args(dir, "run"), dir / "run.log")), 0);
  std::string log = qkv::read_file((dir / "run.log").string());
  EXPECT_NE(log.find("average_last"), std::string::npos) << log;
  EXPECT_NE(log.find("keep_last (2)"), std::string::npos) << log;
  fs::remove_all(dir);
}

TEST(AverageCli, ARunWithFewerCheckpointsAveragesWhatItSaved) {
  fs::path dir = fs::path(::testing::TempDir()) / ("qkv_average_few_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  qkv::testing::write_reversal_corpus(dir, 120, 100, 777);
  write_config(dir, 5, 5, 25);  // saves at 10, 20 and the end (25): three of the five asked for
  ASSERT_EQ(wait_exit(spawn(train_args(dir, "run"), dir / "run.log")), 0) << qkv::read_file((dir / "run.log").string());
  const std::string log = qkv::read_file((dir / "run.log").string());
  EXPECT_NE(log.find("average of the last 3 checkpoints"), std::string::npos) << log;
  EXPECT_NE(log.find("asked for more than the run saved"), std::string::npos) << log;
  EXPECT_TRUE(fs::exists(dir / "run/model/model.safetensors"));
  fs::remove_all(dir);
}
