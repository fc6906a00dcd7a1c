// The `qkv` program: dispatches to one file per subcommand (src/cli/cmd_*.cpp).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <string>

#include "cli.h"
#include "qkv/util/error.h"

// OpenBLAS 0.3.21 (Debian 12) does not recognise recent Xeons and falls back to its SSE3
// kernels, about 4x slower; it reads OPENBLAS_CORETYPE when it loads, before main(). So on an
// AVX-512 machine where the user set neither variable, re-run once with SkylakeX kernels and
// passive OpenMP waits (spinning threads lose badly on shared or busy machines).
static void reexec_with_blas_settings(char** argv) {
  if (std::getenv("QKV_NO_REEXEC") || std::getenv("OPENBLAS_CORETYPE")) return;
  if (!__builtin_cpu_supports("avx512f")) return;
  setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
  setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
  setenv("QKV_NO_REEXEC", "1", 1);
  execv("/proc/self/exe", argv);  // on failure, carry on with the defaults
}

int main(int argc, char** argv) {
  using namespace qkv::cli;
  reexec_with_blas_settings(argv);
  const auto& cmds = registry();
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::printf("usage: qkv <command> [options]\n\ncommands:\n");
    for (auto& [name, c] : cmds) std::printf("  %-12s %s\n", name.c_str(), c.help.c_str());
    return argc < 2 ? 2 : 0;
  }
  auto it = cmds.find(argv[1]);
  if (it == cmds.end()) {
    std::fprintf(stderr, "qkv: unknown command '%s' (see qkv --help)\n", argv[1]);
    return 2;
  }
  try {
    return it->second.run(argc - 1, argv + 1);
  } catch (const qkv::Error& e) {
    std::fprintf(stderr, "qkv %s: error: %s\n", argv[1], e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qkv %s: error: %s\n", argv[1], e.what());
    return 1;
  }
}
