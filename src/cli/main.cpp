// The `qkv` program: dispatches to one file per subcommand (src/cli/cmd_*.cpp).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cli.h"
#include "qkv/util/blas_env.h"
#include "qkv/util/error.h"

int main(int argc, char** argv) {
  using namespace qkv::cli;
  qkv::reexec_with_blas_settings(argv);  // before anything else: see blas_env.h
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
