// What a writer killed mid-write leaves in a run directory (qkv/train/checkpoint.h) is cleared
// when the next CheckpointManager opens it: temporaries and half-deleted checkpoints of dead
// processes go, a checkpoint moved aside comes back if its replacement never arrived, and a live
// process's temporaries are left alone; list() never returns any of them.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <csignal>

#include "qkv/train/checkpoint.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace {

// The pid of a process that has exited (and been reaped).
pid_t dead_pid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return pid;
}

void make_checkpoint(const fs::path& dir) {
  fs::create_directories(dir);
  qkv::write_file_atomic((dir / "model.safetensors").string(), "weights of " + dir.filename().string());
}

}  // namespace

TEST(StaleTemporaries, ClearedForDeadWritersOnly) {
  const fs::path run = fs::path(::testing::TempDir()) / ("qkv_stale_" + std::to_string(getpid()));
  fs::remove_all(run);
  const fs::path ck = run / "checkpoints";
  const std::string dead = std::to_string(dead_pid()), alive = std::to_string(getpid());
  make_checkpoint(ck / "step-000000010");
  make_checkpoint(ck / ("step-000000020.tmp." + dead));  // killed while writing step 20
  make_checkpoint(ck / ("step-000000030.old." + dead));  // killed between the two renames
  make_checkpoint(ck / ("step-000000005.del." + dead));  // killed while pruning step 5
  make_checkpoint(ck / ("step-000000040.tmp." + alive)); // a live writer's
  qkv::write_file_atomic((run / ("run.json.tmp." + dead)).string(), "{");
  EXPECT_EQ(qkv::train::CheckpointManager::list(run.string()).size(), 1u);  // only step 10 is published

  qkv::train::CheckpointManager manager(run.string(), 3);
  EXPECT_TRUE(fs::exists(ck / "step-000000010"));
  EXPECT_FALSE(fs::exists(ck / ("step-000000020.tmp." + dead)));
  EXPECT_FALSE(fs::exists(ck / ("step-000000005.del." + dead)));
  EXPECT_FALSE(fs::exists(ck / ("step-000000030.old." + dead)));
  ASSERT_TRUE(fs::exists(ck / "step-000000030" / "model.safetensors"));  // put back, intact
  EXPECT_EQ(qkv::read_file((ck / "step-000000030" / "model.safetensors").string()),
            "weights of step-000000030.old." + dead);
  EXPECT_TRUE(fs::exists(ck / ("step-000000040.tmp." + alive)));
  EXPECT_FALSE(fs::exists(run / ("run.json.tmp." + dead)));
  auto listed = qkv::train::CheckpointManager::list(run.string());
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(fs::path(listed.back()).filename(), "step-000000030");
  fs::remove_all(run);
}

TEST(StaleTemporaries, PruningNeverShowsAPartialCheckpoint) {
  const fs::path run = fs::path(::testing::TempDir()) / ("qkv_prune_" + std::to_string(getpid()));
  fs::remove_all(run);
  qkv::train::CheckpointManager manager(run.string(), 2);
  for (int step : {1, 2, 3})
    manager.save(step, [](const std::string& dir) {
      qkv::write_file_atomic((fs::path(dir) / "model.safetensors").string(), "w");
    });
  auto listed = qkv::train::CheckpointManager::list(run.string());
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(fs::path(listed.front()).filename(), "step-000000002");
  for (auto& e : fs::directory_iterator(run / "checkpoints"))  // the pruned one is gone entirely
    EXPECT_EQ(e.path().filename().string().find(".del."), std::string::npos) << e.path();
  fs::remove_all(run);
}

// keep_last counts the newest checkpoints; the best is kept besides them. With the best at step 1
// and keep_last 1, steps 2 and 3 were each deleted as soon as they were written.
TEST(StaleTemporaries, PruningKeepsTheNewestBesidesTheBest) {
  const fs::path run = fs::path(::testing::TempDir()) / ("qkv_prune_best_" + std::to_string(getpid()));
  fs::remove_all(run);
  auto fill = [](const std::string& dir) { qkv::write_file_atomic((fs::path(dir) / "model.safetensors").string(), "w"); };
  for (int keep : {1, 2}) {
    fs::remove_all(run);
    qkv::train::CheckpointManager manager(run.string(), keep);
    manager.mark_best(manager.save(1, fill));
    for (int step : {2, 3, 4}) manager.save(step, fill);
    std::vector<std::string> names;
    for (const auto& dir : qkv::train::CheckpointManager::list(run.string()))
      names.push_back(fs::path(dir).filename().string());
    const std::vector<std::string> want =
        keep == 1 ? std::vector<std::string>{"step-000000001", "step-000000004"}
                  : std::vector<std::string>{"step-000000001", "step-000000003", "step-000000004"};
    EXPECT_EQ(names, want) << "keep_last " << keep;
  }
  fs::remove_all(run);
}

// Publishing a model (copy_directory_atomic with a skip list) never writes the skipped training
// state: it once copied it and removed it afterwards, which needed room for it on a nearly full
// disk. Here the copy runs in a child whose files may not exceed 1 MiB (RLIMIT_FSIZE, failing
// writes as a full disk does), and the training state is 2 MiB.
TEST(CopyDirectoryAtomic, SkippedFilesAreNeverWritten) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_publish_" + std::to_string(getpid()));
  fs::remove_all(dir);
  make_checkpoint(dir / "step");
  qkv::write_file_atomic((dir / "step" / "training_state.safetensors").string(), std::string(2 << 20, 'x'));
  const pid_t pid = fork();
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    const rlimit one_mib{1 << 20, 1 << 20};
    setrlimit(RLIMIT_FSIZE, &one_mib);
    try {
      qkv::train::copy_directory_atomic((dir / "step").string(), (dir / "model").string(),
                                        {"training_state.safetensors"});
    } catch (...) {
      _exit(1);
    }
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_EQ(qkv::read_file((dir / "model" / "model.safetensors").string()), "weights of step");
  EXPECT_FALSE(fs::exists(dir / "model" / "training_state.safetensors"));
  fs::remove_all(dir);
}
