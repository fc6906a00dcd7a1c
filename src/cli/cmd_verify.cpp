// `qkv verify PATH...`: reads every .safetensors file in the given files and directories
// (recursively) as loading would: the header, every offset, and the CRC-32C that qkv records for
// each tensor (qkv/io/format/safetensors.h). Prints one line per file; exits 1 at the first bad
// one with the loader's error (file, tensor, expected and found checksum). A check of a downloaded
// or copied checkpoint, and what scripts/soak.sh runs after every kill.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "cli.h"
#include "qkv/io/format/safetensors.h"

namespace {

namespace fs = std::filesystem;

int run_verify(int argc, char** argv) {
  CLI::App app{"Check safetensors files (structure and qkv's per-tensor checksums)", "qkv verify"};
  std::vector<std::string> paths;
  app.add_option("paths", paths, "files, or directories searched recursively for *.safetensors")->required();
  QKV_PARSE(app, argc, argv);
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    QKV_CHECK(fs::exists(p), p, "no such file or directory");
    if (!fs::is_directory(p)) {
      files.push_back(p);
      continue;
    }
    std::vector<std::string> found;
    for (auto& e : fs::recursive_directory_iterator(p))
      if (e.is_regular_file() && e.path().extension() == ".safetensors") found.push_back(e.path().string());
    std::sort(found.begin(), found.end());
    QKV_CHECK(!found.empty(), p, "holds no .safetensors file");
    files.insert(files.end(), found.begin(), found.end());
  }
  for (const std::string& f : files) {
    const qkv::safetensors::Contents c = qkv::safetensors::load(f);
    std::printf("ok %s: %zu tensors, %s\n", f.c_str(), c.tensors.size(),
                c.checksummed ? "checksums match" : "no checksums recorded (not written by qkv)");
  }
  return 0;
}

qkv::cli::Register register_verify("verify", "check safetensors files: structure and qkv's per-tensor checksums",
                                   run_verify);

}  // namespace
