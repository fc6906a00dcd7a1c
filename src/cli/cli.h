// src/cli/cli.h - subcommand registry. Each cmd_<name>.cpp registers itself with
//   static qkv::cli::Register reg("name", "one-line help", run);
// where run(argc, argv) parses its own options (CLI11) and returns the exit code.
#pragma once
#include <functional>
#include <map>
#include <string>

namespace qkv::cli {

struct Command {
  std::string help;
  std::function<int(int, char**)> run;
};

std::map<std::string, Command>& registry();

struct Register {
  Register(const std::string& name, const std::string& help, std::function<int(int, char**)> run) {
    registry()[name] = Command{help, std::move(run)};
  }
};

}  // namespace qkv::cli
