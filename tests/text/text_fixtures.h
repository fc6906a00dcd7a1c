// tests/text/text_fixtures.h - helpers shared by the tokenizer tests: run a command, fetch the
// npm reference packages, build the test text (never committed) in the build tree.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace qkv::testing {

// Runs `cmd` with /bin/sh; returns its stdout; fails the test (fatal) on a non-zero exit.
std::string run_command(const std::string& cmd);

// tools/text/fetch_npm.sh: returns the npm cache dir (node_modules/, gpt2/, bert-base-uncased/).
// Throws std::runtime_error with a clear message if npm is unreachable.
const std::string& npm_cache();

// Test text of about `bytes` bytes built by tools/text/make_test_text.py into the build tree.
std::string test_text_path(const std::string& name, size_t bytes, bool valid_only);

std::string slurp(const std::string& path);
std::vector<std::string> split_lines_keep_newline(const std::string& text);
std::vector<std::string> read_lines(const std::string& path);  // without the '\n'
std::vector<int32_t> parse_ids(const std::string& line);
std::string shell_quote(const std::string& s);
// A file name in the build tree's text-data/ unique to this process (tests run in parallel).
std::string scratch(const std::string& name);

}  // namespace qkv::testing
