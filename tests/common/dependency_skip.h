// tests/common/dependency_skip.h - skipping a test whose dependency is missing, which fails it
// instead where every test dependency is known to be installed.
//
// Two kinds of skip:
//  - what the machine is, not what was installed: the CPU has no bf16 / int8 / AVX-512 kernels,
//    the build is ASan's, the kernel has no transparent huge pages or a /proc file: GTEST_SKIP()
//    << why, everywhere;
//  - a program or build option that `scripts/install.sh --tests` provides (mpirun and an MPI
//    build, GNU msgfmt, Chromium): QKV_SKIP_MISSING_DEPENDENCY() << why. scripts/test.sh, and so
//    CI, sets QKV_TEST_DEPENDENCIES=installed once it has installed them, and there the same
//    statement fails the test, so that a dependency gone missing cannot turn a feature's tests
//    into a quiet skip.
// Decided in the test body, not in main(): CTest reports any test whose output shows "[  SKIPPED ]"
// as skipped, whatever the binary's exit status (gtest_discover_tests' SKIP_REGULAR_EXPRESSION).
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace qkv::testing {

inline bool test_dependencies_installed() {
  const char* v = std::getenv("QKV_TEST_DEPENDENCIES");
  return v && std::strcmp(v, "installed") == 0;
}

}  // namespace qkv::testing

// A statement, streamed like GTEST_SKIP(): `if (!found) QKV_SKIP_MISSING_DEPENDENCY() << "why";`.
#define QKV_SKIP_MISSING_DEPENDENCY()                                                                        \
  return GTEST_MESSAGE_AT_(__FILE__, __LINE__,                                                               \
                           ::qkv::testing::test_dependencies_installed()                                     \
                               ? "QKV_TEST_DEPENDENCIES=installed, but a test dependency is missing: "     \
                               : "",                                                                         \
                           ::qkv::testing::test_dependencies_installed() ? ::testing::TestPartResult::kFatalFailure \
                                                                         : ::testing::TestPartResult::kSkip)
