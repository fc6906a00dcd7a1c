// src/cli/cli.h - subcommand registry. Each cmd_<name>.cpp registers itself with
//   static qkv::cli::Register reg("name", "one-line help", run);
// where run(argc, argv) parses its own options (CLI11) and returns the exit code.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "qkv/kernels/bf16.h"

namespace CLI {
class App;
}

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

// The input lines of a command: from `path`, or stdin when it is empty. '\r' before a newline is
// dropped; a line that is not valid UTF-8, or no line at all, is an error naming the file (or
// stdin), the line and `what` the lines are (e.g. "sentences to translate").
std::vector<std::string> read_input_lines(const std::string& path, const std::string& what);

// --precision of the inference commands (translate, generate, classify, embed, serve):
// add_precision_option registers it on `app` (fp32 | bf16 | int8, default fp32, stored in
// `value`); read_precision checks the value before the model loads: bf16 on a CPU without AMX or
// AVX512_BF16, or int8 without AVX512-VNNI or AMX, is an error naming `command`
// (kernels::check_precision_supported).
void add_precision_option(CLI::App& app, std::string& value);
kernels::MatmulPrecision read_precision(const std::string& value, const char* command);

}  // namespace qkv::cli
