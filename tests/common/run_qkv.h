// Running the `qkv` program from tests: QKV_BIN (set by CTest) or the build tree's binary.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace qkv::testing {

inline std::string qkv_bin() {
  const char* b = std::getenv("QKV_BIN");
  return b ? b : std::string(QKV_BINARY_DIR) + "/qkv";
}

// Runs program argv[0] with its arguments, stdout to out_path and stderr to log_path; returns the
// exit code (128 + signal if it was killed).
inline int run_program(const std::vector<std::string>& args, const std::filesystem::path& log_path,
                       const std::string& out_path = "/dev/null") {
  pid_t pid = fork();
  if (pid == 0) {
    if (!std::freopen(log_path.c_str(), "w", stderr) || !std::freopen(out_path.c_str(), "w", stdout)) _exit(126);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs qkv with args (as run_program).
inline int run_qkv(const std::vector<std::string>& args, const std::filesystem::path& log_path,
                   const std::string& out_path = "/dev/null") {
  std::vector<std::string> full{qkv_bin()};
  full.insert(full.end(), args.begin(), args.end());
  return run_program(full, log_path, out_path);
}

}  // namespace qkv::testing
