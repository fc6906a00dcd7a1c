// train/progress.h's MetricsLog: appends one JSON object per line; a resumed run first drops the
// lines past the step it restored (an earlier process's, written after its last checkpoint) and a
// torn last line, so that after SIGKILL or a failed save and --resume every step's lines appear once.
#include <gtest/gtest.h>

#include <string>

#include "qkv/train/progress.h"
#include "qkv/util/file.h"
#include "scratch_util.h"

using qkv::train::MetricsLog;
using qkv::read_file;
using qkv::write_file_atomic;

TEST(MetricsLog, AResumedRunDropsTheLinesPastItsStepAndATornLine) {
  const std::string path = qkv_test::scratch_dir("metrics_log") + "/metrics.jsonl";
  const std::string before =
      "{\"kind\":\"train\",\"step\":10.0,\"train_loss\":2.5}\n"
      "{\"kind\":\"valid\",\"step\":10.0,\"bleu\":1.0}\n"
      "{\"kind\":\"train\",\"step\":20.0,\"train_loss\":2.0}\n"
      "{\"kind\":\"valid\",\"step\":20.0,\"bleu\":2.0}\n"
      "{\"kind\":\"train\",\"step\":30.0,\"train_loss\":1.5}\n"
      "{\"kind\":\"train\",\"step\":40.0,\"tra";
  write_file_atomic(path, before);
  {
    MetricsLog log(path, 20);
    log.write({{"step", 30.0}, {"train_loss", 1.4}}, "train");
  }
  EXPECT_EQ(read_file(path), before.substr(0, before.find("{\"kind\":\"train\",\"step\":30.0")) +
                                 "{\"kind\":\"train\",\"step\":30.0,\"train_loss\":1.4}\n");
  {  // a new run (no step restored) only appends
    MetricsLog log(path);
    log.write({{"step", 1.0}}, "train");
  }
  EXPECT_NE(read_file(path).find("\"train_loss\":1.4}\n{\"kind\":\"train\",\"step\":1.0}\n"), std::string::npos)
      << read_file(path);
}
