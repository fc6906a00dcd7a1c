// The process's peak resident set (VmHWM), for the tests that bound what loading a model costs.
#pragma once
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

namespace qkv::testing {

// Resets VmHWM (the peak RSS) to the current RSS: "5" into /proc/self/clear_refs. False where
// this system does not allow it.
inline bool reset_peak_rss() {
  FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool written = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && written;
}

// A field of /proc/self/status in KiB ("VmRSS:", "VmHWM:"), or -1 when it is missing.
inline int64_t status_kib(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(std::string(field).size()));
  return -1;
}

}  // namespace qkv::testing
