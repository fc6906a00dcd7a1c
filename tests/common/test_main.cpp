// main() of every test binary: GoogleTest's, after qkv's OpenBLAS settings (the qkv program's
// own re-exec), so that a bare `ctest` or `build/tests/test_x` computes with the same BLAS
// kernels, and so in the same summation order, as scripts/test.sh and the qkv command.
//
// Skips: a test that skips must say why (GTEST_SKIP() << "reason"); one that does not fails the
// binary (when it runs alone: under CTest a skip is reported skipped whatever the exit status). A
// missing test dependency, where scripts/test.sh installed them all, fails in the test itself:
// dependency_skip.h.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "qkv/util/blas_env.h"

namespace {

class SkipPolicy : public ::testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const ::testing::TestResult* r = info.result();
    if (!r->Skipped()) return;
    std::string reason;
    for (int i = 0; i < r->total_part_count(); ++i)
      if (r->GetTestPartResult(i).skipped() && r->GetTestPartResult(i).message()) reason += r->GetTestPartResult(i).message();
    const std::string name = std::string(info.test_suite_name()) + "." + info.name();
    if (reason.empty()) bad_.push_back(name + ": skipped without a reason (write GTEST_SKIP() << \"why\")");
  }
  const std::vector<std::string>& bad() const { return bad_; }

 private:
  std::vector<std::string> bad_;
};

// This process's scratch files: TempDir()/qkv_<what>_<pid> (the tests' own temporary
// directories) and <build>/test_scratch/<name>.<pid> (scratch_util.h). Removed after a run in
// which every test passed, kept for a look after a failure. Every name ends in this process's id,
// so nothing another test process uses is touched.
void remove_own_scratch() {
  namespace fs = std::filesystem;
  const std::string pid = std::to_string(::getpid());
  auto ends_with = [](const std::string& s, const std::string& suffix) {
    return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  const fs::path tmp(::testing::TempDir()), scratch = fs::path(QKV_BINARY_DIR) / "test_scratch";
  for (const fs::path& dir : {tmp, scratch}) {
    std::error_code ec;
    std::vector<fs::path> own;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      const std::string n = it->path().filename().string();
      if (dir == tmp ? n.rfind("qkv_", 0) == 0 && ends_with(n, "_" + pid) : ends_with(n, "." + pid))
        own.push_back(it->path());
    }
    for (const fs::path& p : own) fs::remove_all(p, ec);  // best effort: a leftover is only untidy
  }
}

}  // namespace

int main(int argc, char** argv) {
  qkv::reexec_with_blas_settings(argv);
  if (const std::string e = qkv::blas_coretype_error(std::getenv("OPENBLAS_CORETYPE"), qkv::this_cpu_vector_isa());
      !e.empty()) {
    std::fprintf(stderr, "qkv tests: %s\n", e.c_str());
    return 2;
  }
  ::testing::InitGoogleTest(&argc, argv);
  auto* policy = new SkipPolicy;  // owned by GoogleTest's listener list
  ::testing::UnitTest::GetInstance()->listeners().Append(policy);
  int rc = RUN_ALL_TESTS();
  for (const std::string& b : policy->bad()) std::fprintf(stderr, "qkv test policy: %s\n", b.c_str());
  if (rc == 0 && policy->bad().empty()) remove_own_scratch();
  return policy->bad().empty() ? rc : 1;
}
