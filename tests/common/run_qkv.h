// Running the `qkv` program from tests: QKV_BIN (set by CTest) or the build tree's binary.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "qkv/util/file.h"

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

// ---- runs that are killed on purpose (training resume tests) ----

// Starts program args[0] in the background, stderr to `log`, stdout to /dev/null; returns its pid.
inline pid_t spawn(const std::vector<std::string>& args, const std::filesystem::path& log) {
  pid_t pid = fork();
  if (pid == 0) {
    if (!std::freopen(log.c_str(), "w", stderr) || !std::freopen("/dev/null", "w", stdout)) _exit(126);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// Waits for pid; returns its exit code, or 128 + signal.
inline int wait_exit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// run/checkpoints/step-NNNNNNNNN: the directory of a run's checkpoint at `step`.
inline std::string step_dir(const std::filesystem::path& run, int step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%09d", step);
  return (run / "checkpoints" / name).string();
}

// The records of <run>/metrics.jsonl that have `key` (e.g. "valid_ppl"), in order; read_file
// throws when the file cannot be read (no log is not an empty log).
inline std::vector<nlohmann::json> metrics_with(const std::filesystem::path& run, const std::string& key) {
  std::vector<nlohmann::json> out;
  std::istringstream in(qkv::read_file((run / "metrics.jsonl").string()));
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains(key)) out.push_back(std::move(j));
  }
  return out;
}

// Waits until `dir` exists (checkpoints are published by an atomic rename) or pid exits.
inline bool wait_for(const std::string& dir, pid_t pid, double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (std::filesystem::exists(dir)) return true;
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) return std::filesystem::exists(dir);
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  return false;
}

}  // namespace qkv::testing
