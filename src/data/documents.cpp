#include "qkv/data/documents.h"

#include "qkv/util/error.h"
#include "qkv/util/file.h"
#include "qkv/util/utf8.h"

namespace qkv::data {
namespace {

bool blank(std::string_view line) { return line.find_first_not_of(" \t\r") == std::string_view::npos; }

}  // namespace

std::vector<std::string> read_documents(const std::string& path) {
  const std::string text = read_file(path);
  std::vector<std::string_view> lines;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string_view line(text.data() + pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    QKV_CHECK(utf8::is_valid(line), path, "line ", lines.size() + 1, " is not valid UTF-8");
    lines.push_back(line);
    pos = nl + 1;
  }
  bool paragraphs = false;  // a blank line between two non-blank ones
  size_t first = 0, last = lines.size();
  while (first < lines.size() && blank(lines[first])) ++first;
  while (last > first && blank(lines[last - 1])) --last;
  for (size_t i = first; i < last && !paragraphs; ++i) paragraphs = blank(lines[i]);
  std::vector<std::string> docs;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) docs.push_back(std::move(cur));
    cur.clear();
  };
  for (std::string_view line : lines) {
    if (blank(line)) {
      flush();
      continue;
    }
    if (!paragraphs) {
      docs.emplace_back(line);
      continue;
    }
    if (!cur.empty()) cur += '\n';
    cur += line;
  }
  flush();
  QKV_CHECK(!docs.empty(), path, "holds no document (no non-blank line)");
  return docs;
}

}  // namespace qkv::data
