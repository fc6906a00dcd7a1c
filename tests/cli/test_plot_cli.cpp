// `qkv plot --metrics`: an error in writing --out names --out (it was blamed on the metrics file,
// "cannot plot its values"), and a wrong extension is found before the metrics are read.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "qkv/util/file.h"
#include "run_qkv.h"

namespace fs = std::filesystem;
using qkv::read_file;
using qkv::testing::run_qkv;

TEST(PlotCli, OutputErrorsNameTheOutput) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_plot_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string metrics = (dir / "metrics.jsonl").string();
  qkv::write_file_atomic(metrics, "{\"step\": 1, \"train_loss\": 3.5}\n{\"step\": 2, \"train_loss\": 3.1}\n");
  const fs::path log = dir / "log";

  const std::string missing = (dir / "missing" / "p.png").string();
  EXPECT_EQ(run_qkv({"plot", "--metrics", metrics, "--out", missing}, log), 1);
  EXPECT_NE(read_file(log.string()).find(missing), std::string::npos) << read_file(log.string());
  EXPECT_EQ(read_file(log.string()).find("cannot plot its values"), std::string::npos) << read_file(log.string());

  const std::string txt = (dir / "p.txt").string();
  EXPECT_EQ(run_qkv({"plot", "--metrics", (dir / "absent.jsonl").string(), "--out", txt}, log), 1);
  EXPECT_NE(read_file(log.string()).find(txt + ": --out: expected a .png or .svg file name"), std::string::npos)
      << read_file(log.string());

  // Values that cannot be drawn are still the metrics file's.
  qkv::write_file_atomic(metrics, "{\"step\": 1, \"train_loss\": -1e308}\n{\"step\": 2, \"train_loss\": 1e308}\n");
  EXPECT_EQ(run_qkv({"plot", "--metrics", metrics, "--out", (dir / "p.png").string()}, log), 1);
  EXPECT_NE(read_file(log.string()).find(metrics + ": cannot plot its values"), std::string::npos)
      << read_file(log.string());

  qkv::write_file_atomic(metrics, "{\"step\": 1, \"train_loss\": 3.5}\n{\"step\": 2, \"train_loss\": 3.1}\n");
  EXPECT_EQ(run_qkv({"plot", "--metrics", metrics, "--out", (dir / "p.svg").string()}, log), 0)
      << read_file(log.string());
  EXPECT_TRUE(fs::exists(dir / "p.svg"));
  fs::remove_all(dir);
}
