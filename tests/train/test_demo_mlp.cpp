// `qkv demo-mlp` (src/cli/cmd_demo.cpp) end to end: the loss falls, the accuracy is far above
// chance, and bad options fail with a message.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "run_qkv.h"

namespace {

struct Result {
  int status;
  std::string out;
};

Result run(const std::string& args) {
  std::string cmd = qkv::testing::qkv_bin() + " demo-mlp " + args + " 2>&1";
  Result r{-1, ""};
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) r.out.append(buf.data(), n);
  r.status = pclose(f);
  return r;
}

}  // namespace

TEST(DemoMlp, LossFallsAndClassifiesSpirals) {
  // The test target depends on the program (tests/CMakeLists.txt): a missing binary is a failure.
  ASSERT_TRUE(std::filesystem::exists(qkv::testing::qkv_bin())) << qkv::testing::qkv_bin() << " is not built";
  Result r = run("--steps 150 --points 100 --print-every 50 --min-accuracy 0.9");
  ASSERT_EQ(r.status, 0) << r.out;
  // The summary line: "loss <first> -> <last>; accuracy train <pct>%".
  const size_t summary = r.out.find("; accuracy train ");
  ASSERT_NE(summary, std::string::npos) << r.out;
  const size_t from = r.out.rfind("loss ", summary);
  ASSERT_NE(from, std::string::npos) << r.out;
  double first = 0, last = 0, accuracy = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str() + from, "loss %lf -> %lf; accuracy train %lf%%", &first, &last, &accuracy), 3)
      << r.out;
  EXPECT_GT(first, 1.0);  // about ln 3 at the start
  EXPECT_LT(last, 0.2);
  EXPECT_GT(accuracy, 90.0);
  EXPECT_NE(r.out.find("step    50"), std::string::npos) << r.out;
  Result bad = run("--steps 10 --warmup 10");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("--warmup"), std::string::npos) << bad.out;
}
