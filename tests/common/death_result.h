// tests/common/death_result.h - a result handed from a death test's child to the test. In the
// "threadsafe" style the child is a fresh copy of the test binary that the test's process starts,
// so nothing the parent computed before EXPECT_EXIT reaches it (which is the point when the child
// must set ONEDNN_MAX_CPU_ISA before oneDNN reads it), and nothing the child computes comes back
// but its exit code and stderr. A file named by the test process's pid carries the rest: the child
// writes it (its parent's pid), the test reads and removes it after EXPECT_EXIT (its own).
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "qkv/util/file.h"

namespace qkv::testing {

inline std::string death_result_path(pid_t test_process) {
  return ::testing::TempDir() + "/qkv_death_result_" + std::to_string(test_process);
}

// In the child: false if the file could not be written.
inline bool write_death_result(const std::string& bytes) {
  FILE* f = std::fopen(death_result_path(getppid()).c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

// In the test, after EXPECT_EXIT: the child's bytes (the file is removed), or nothing.
inline std::optional<std::string> take_death_result() {
  const std::string path = death_result_path(getpid());
  if (!std::filesystem::exists(path)) return std::nullopt;
  std::string bytes = qkv::read_file(path);
  std::remove(path.c_str());
  return bytes;
}

}  // namespace qkv::testing
