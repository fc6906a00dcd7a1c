// Shared by every fuzz target (tests/fuzz/fuzz_target.h): the registry and scratch files.
#include <unistd.h>

#include <filesystem>

#include "fuzz_target.h"

namespace qkv::fuzz {

std::map<std::string, TargetFn>& targets() {
  static std::map<std::string, TargetFn> t;
  return t;
}

namespace {
// A directory of this process, removed at exit.
struct ScratchDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("qkv_fuzz_" + std::to_string(::getpid()));
  ScratchDir() { std::filesystem::create_directories(path); }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};
}  // namespace

std::string scratch_dir() {
  static const ScratchDir dir;
  return dir.path.string();
}

std::string scratch_file(const std::string& name, const void* data, size_t size) {
  const std::string path = scratch_dir() + "/" + name;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  // Plain writes, not write_file_atomic: no fsync per input (fuzzing runs thousands a second).
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) bug("cannot write " + path);
  return path;
}

}  // namespace qkv::fuzz
