// Private to the text layer: running external tools (apt-get, dpkg-deb, xz, npm) without a shell.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace qkv::data::detail {

struct ProcessResult {
  int status = -1;  // exit code, or 128 + signal
  std::string err;  // captured stderr (last 64 KiB)
};

// Runs argv[0] (looked up in PATH) with argv, in directory `cwd` ("" = current). Each chunk of
// stdout goes to on_stdout (or is discarded if null). Throws qkv::Error if it cannot start.
ProcessResult run_process(const std::vector<std::string>& argv, const std::string& cwd,
                          const std::function<void(const char*, size_t)>& on_stdout);

// Runs and returns stdout; throws qkv::Error naming the command and its stderr on failure.
std::string run_capture(const std::vector<std::string>& argv, const std::string& cwd = "");

// Runs, streaming stdout; throws like run_capture on a non-zero exit.
void run_streaming(const std::vector<std::string>& argv,
                   const std::function<void(const char*, size_t)>& on_stdout,
                   const std::string& cwd = "");

std::string command_line(const std::vector<std::string>& argv);

}  // namespace qkv::data::detail
