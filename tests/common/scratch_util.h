// tests/common/scratch_util.h - scratch directories and running tools, for tests that write files.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "qkv/util/file.h"

namespace qkv_test {

// A fresh directory under the build tree, unique per test and process.
inline std::string scratch_dir(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path p = fs::path(QKV_BINARY_DIR) / "test_scratch" / (name + "." + std::to_string(getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

// TempDir()/qkv_<what>_<pid>, not created: the path a test gives a component that makes its own
// directory (a Trainer's run directory). test_main removes it after a passing run.
inline std::string temp_run_dir(const std::string& what) {
  return ::testing::TempDir() + "/qkv_" + what + "_" + std::to_string(getpid());
}

// TempDir()/qkv_<what>_<name>_<pid>, removed if it exists and not created: the path a test
// saves a model directory or a file to.
inline std::string fresh_temp_path(const std::string& what, const std::string& name) {
  const std::string p = temp_run_dir(what + "_" + name);
  std::filesystem::remove_all(p);
  return p;
}

// A directory <temp>/qkv_<group>_<pid>/<name>, created here and removed with the object (the
// group directory too, once empty): for tests that write large model directories.
struct ScopedTempDir {
  std::string dir;
  ScopedTempDir(const std::string& group, const std::string& name)
      : dir((std::filesystem::temp_directory_path() / ("qkv_" + group + "_" + std::to_string(getpid())) / name)
                .string()) {
    std::filesystem::create_directories(dir);
  }
  ~ScopedTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    std::filesystem::remove(std::filesystem::path(dir).parent_path(), ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
};

// Runs a shell command; returns its exit status (0 = success).
inline int run_shell(const std::string& cmd) {
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

inline std::string python() { return "/usr/bin/python3"; }
inline std::string tool(const std::string& rel) {
  return std::string(QKV_SOURCE_DIR) + "/tools/text/" + rel;
}

}  // namespace qkv_test
