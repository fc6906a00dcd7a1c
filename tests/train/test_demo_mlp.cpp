// `qkv demo-mlp` (src/cli/cmd_demo.cpp) end to end: the loss falls, the accuracy is far above
// chance, and bad options fail with a message.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>

namespace {

struct Result {
  int status;
  std::string out;
};

Result run(const std::string& args) {
  std::string cmd = std::string(std::getenv("QKV_BIN")) + " demo-mlp " + args + " 2>&1";
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
  const char* bin = std::getenv("QKV_BIN");
  if (!bin || !std::filesystem::exists(bin)) GTEST_SKIP() << "QKV_BIN is not set to a built qkv program (run via ctest)";
  Result r = run("--steps 150 --points 100 --print-every 50 --min-accuracy 0.9");
  ASSERT_EQ(r.status, 0) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(loss ([0-9.]+) -> ([0-9.]+); accuracy train ([0-9.]+)%)")))
      << r.out;
  EXPECT_GT(std::stod(m[1]), 1.0);   // about ln 3 at the start
  EXPECT_LT(std::stod(m[2]), 0.2);
  EXPECT_GT(std::stod(m[3]), 90.0);
  EXPECT_NE(r.out.find("step    50"), std::string::npos) << r.out;
  Result bad = run("--steps 10 --warmup 10");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("--warmup"), std::string::npos) << bad.out;
}
