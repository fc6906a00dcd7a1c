// Every fuzz target's seed corpus (tests/fuzz/corpus/<target>/) and every crash input found so far
// (tests/fuzz/crashes/<target>/) replayed through the target, in the normal test suite (Release,
// and ASan+UBSan in build-asan): a parser that regresses on a fixed input fails here, without
// clang or libFuzzer. scripts/fuzz.sh runs the same targets under libFuzzer.
#include <gtest/gtest.h>

#include <filesystem>

#include "fuzz_target.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace {

const fs::path kFuzzDir = fs::path(QKV_SOURCE_DIR) / "tests" / "fuzz";

std::vector<fs::path> inputs(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

class FuzzReplay : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST(FuzzReplay, EveryCorpusDirectoryHasATarget) {
  const auto& t = qkv::fuzz::targets();
  EXPECT_GE(t.size(), 12u);
  for (const char* kind : {"corpus", "crashes"}) {
    if (!fs::is_directory(kFuzzDir / kind)) continue;
    for (auto& e : fs::directory_iterator(kFuzzDir / kind))
      EXPECT_TRUE(t.count(e.path().filename().string())) << e.path() << " names no fuzz target";
  }
}

TEST_P(FuzzReplay, SeedsAndPastCrashes) {
  const std::string name = GetParam();
  const qkv::fuzz::TargetFn fn = qkv::fuzz::targets().at(name);
  const std::vector<fs::path> seeds = inputs(kFuzzDir / "corpus" / name);
  EXPECT_GE(seeds.size(), 2u) << "tests/fuzz/corpus/" << name << " needs seeds (tools/fuzz_seeds.py writes them)";
  std::vector<fs::path> all = seeds, crashes = inputs(kFuzzDir / "crashes" / name);
  all.insert(all.end(), crashes.begin(), crashes.end());
  for (const fs::path& p : all) {
    SCOPED_TRACE(p.string());
    const std::string bytes = qkv::read_file(p.string());
    EXPECT_EQ(fn(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzReplay, ::testing::ValuesIn([] {
                           std::vector<std::string> names;
                           for (auto& [n, f] : qkv::fuzz::targets()) names.push_back(n);
                           return names;
                         }()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });
