#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli.h"
#include "qkv/util/error.h"
#include "qkv/util/utf8.h"

namespace qkv::cli {

void add_precision_option(CLI::App& app, std::string& value) {
  app.add_option("--precision", value,
                 "matrix products in fp32, bf16 (weights converted once to bf16, f32 accumulation; needs AMX or "
                 "AVX512_BF16) or int8 (the large weights quantized once per output channel, activations per row, "
                 "exact int32 sums; needs AVX512-VNNI, AMX or AVX2)")
      ->check(CLI::IsMember({"fp32", "bf16", "int8"}))
      ->capture_default_str();
}

kernels::MatmulPrecision read_precision(const std::string& value, const char* command) {
  const kernels::MatmulPrecision p = kernels::parse_precision(value);
  kernels::check_precision_supported(p, (std::string(command) + " --precision " + value).c_str());
  return p;
}

std::ifstream open_input(const std::string& path, const std::string& what) {
  std::error_code ec;
  QKV_CHECK(!std::filesystem::is_directory(path, ec), path, "is a directory; expected a file of ", what,
            ", one per line");
  std::ifstream file(path, std::ios::binary);
  QKV_CHECK(file.good(), path, "cannot open for reading (", what, ", one per line)");
  return file;
}

void warn_truncated(const char* command, const std::string& where, int64_t line, int64_t max_tokens,
                    const char* limit) {
  std::fprintf(stderr, "%s: warning: %s:%lld: input truncated to %lld tokens (%s)\n", command, where.c_str(),
               (long long)line, (long long)max_tokens, limit);
}

std::vector<std::string> read_input_lines(const std::string& path, const std::string& what) {
  const std::string where = path.empty() ? "stdin" : path;
  std::ifstream file;
  if (!path.empty()) file = open_input(path, what);
  std::istream& in = path.empty() ? std::cin : file;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    QKV_CHECK(utf8::is_valid(line), where, "line ", lines.size() + 1, ": invalid UTF-8");
    lines.push_back(std::move(line));
  }
  QKV_CHECK(!lines.empty(), where, "no input lines (expected ", what, ", one per line)");
  return lines;
}

void print_line(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
}

}  // namespace qkv::cli
