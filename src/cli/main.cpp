// The `qkv` program: dispatches to one file per subcommand (src/cli/cmd_*.cpp).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "cli.h"
#include "qkv/util/blas_env.h"
#include "qkv/util/error.h"

namespace {

// Output that never arrived is a failure: stdout to a full disk, a closed socket or /dev/full must
// not exit 0. std::cout shares stdout's buffer (sync_with_stdio), so one flush settles both.
int check_stdout(const char* command, int rc) {
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int err = errno;
  if (flushed && !std::ferror(stdout) && std::cout.good()) return rc;
  std::fprintf(stderr, "qkv %s: error: stdout: write failed (%s)\n", command,
               err ? std::strerror(err) : "an earlier write failed");
  return rc ? rc : 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace qkv::cli;
  qkv::reexec_with_blas_settings(argv);  // before anything else: see blas_env.h
  if (const std::string e = qkv::blas_coretype_error(std::getenv("OPENBLAS_CORETYPE"), qkv::this_cpu_vector_isa());
      !e.empty()) {
    std::fprintf(stderr, "qkv: error: %s\n", e.c_str());
    return 2;
  }
  const auto& cmds = registry();
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::printf("usage: qkv <command> [options]\n\ncommands:\n");
    for (auto& [name, c] : cmds) std::printf("  %-12s %s\n", name.c_str(), c.help.c_str());
    return check_stdout("--help", argc < 2 ? 2 : 0);
  }
  auto it = cmds.find(argv[1]);
  if (it == cmds.end()) {
    std::fprintf(stderr, "qkv: unknown command '%s' (see qkv --help)\n", argv[1]);
    return 2;
  }
  try {
    return check_stdout(argv[1], it->second.run(argc - 1, argv + 1));
  } catch (const qkv::Error& e) {
    std::fprintf(stderr, "qkv %s: error: %s\n", argv[1], e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qkv %s: error: %s\n", argv[1], e.what());
    return 1;
  }
}
