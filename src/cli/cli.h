// src/cli/cli.h - subcommand registry. Each cmd_<name>.cpp registers itself with
//   static qkv::cli::Register register_<name>("name", "one-line help", run_<name>);
// where run_<name>(argc, argv) parses its own options (CLI11) and returns the exit code. The names
// differ from file to file: the front end compiles in unity batches (CMakeLists.txt).
#pragma once
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "qkv/kernels/bf16.h"

namespace CLI {
class App;
class ParseError;
class Validator;
}  // namespace CLI

// Parses a command's options in run(): `--help` exits 0; a usage error (an unknown option, a
// missing or invalid value) prints CLI11's message and exits 2, as an unknown command does.
// CLI11_PARSE would return CLI11's own code per kind of error (105, 106, 109, ...), which a
// script cannot tell apart from a failure of the command itself. The file must include CLI11.
#define QKV_PARSE(app, argc, argv)               \
  try {                                          \
    (app).parse((argc), (argv));                 \
  } catch (const CLI::ParseError& e) {           \
    return ::qkv::cli::usage_exit((app), e);     \
  }

namespace qkv::cli {

struct Command {
  std::string help;
  std::function<int(int, char**)> run;
};

std::map<std::string, Command>& registry();

// QKV_PARSE's handler: prints the error (or the help) and returns the exit code, 0 or 2. A
// required option that seems missing because its name was mistyped (`--modle x`) is reported as
// the unexpected argument, not as "--model is required".
int usage_exit(CLI::App& app, const CLI::ParseError& error);

// Option checks with a plain message: "--beam: must be a positive number, got '0'" (CLI11's
// PositiveNumber printed its range up to DBL_MAX in full). Both refuse nan and infinity.
const CLI::Validator& positive();
const CLI::Validator& non_negative();
// A seed: decimal digits for a number in [0, 2^64). "-1" and "18446744073709551616" were taken
// (wrapped or saturated) by CLI11's conversion, as any number is a seed.
const CLI::Validator& seed_value();

struct Register {
  Register(const std::string& name, const std::string& help, std::function<int(int, char**)> run) {
    registry()[name] = Command{help, std::move(run)};
  }
};

// The input lines of a command: from `path`, or stdin when it is empty. '\r' before a newline is
// dropped; a line that is not valid UTF-8, or no line at all, is an error naming the file (or
// stdin), the line and `what` the lines are (e.g. "sentences to translate").
std::vector<std::string> read_input_lines(const std::string& path, const std::string& what);

// `path` opened for reading (binary): an error names it when it is missing, unreadable or a
// directory (which std::ifstream opens, and then reads as empty), with `what` its lines are.
std::ifstream open_input(const std::string& path, const std::string& what);

// A line of input cut to the model's `max_tokens`: a warning on stderr naming where ("FILE:LINE").
void warn_truncated(const char* command, const std::string& where, int64_t line, int64_t max_tokens,
                    const char* limit);

// Writes `text` then a newline to stdout, every byte: a NUL in the user's text would stop
// printf's %s and cut the line.
void print_line(const std::string& text);

// --precision of the inference commands (translate, generate, classify, embed, tag, answer, serve,
// eval-classify, eval-tag):
// add_precision_option registers it on `app` (fp32 | bf16 | int8, default fp32, stored in
// `value`); read_precision checks the value before the model loads: bf16 on a CPU without AMX or
// AVX512_BF16, or int8 without AVX512-VNNI, AMX or an AVX2 build, is an error naming `command`
// (kernels::check_precision_supported).
void add_precision_option(CLI::App& app, std::string& value);
kernels::MatmulPrecision read_precision(const std::string& value, const char* command);

}  // namespace qkv::cli
