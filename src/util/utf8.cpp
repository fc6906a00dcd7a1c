#include "qkv/util/utf8.h"

#include <algorithm>

#include "qkv/util/error.h"

namespace qkv::utf8 {

std::u32string to_u32_strict(std::string_view s, const std::string& where) {
  std::u32string out;
  out.reserve(s.size());
  uint32_t cp;
  for (size_t i = 0; i < s.size();) {
    const int len = decode(s, i, cp);
    QKV_CHECK(cp != kInvalid, where, "invalid UTF-8 at byte ", i);
    out += char32_t(cp);
    i += size_t(len);
  }
  return out;
}

uint64_t check_lines(std::string_view text, const std::string& file, uint64_t first_line) {
  const uint64_t newlines = uint64_t(std::count(text.begin(), text.end(), '\n'));
  if (is_valid(text)) return newlines;  // the common case: one pass, no line bookkeeping
  uint64_t line = first_line;
  size_t start = 0;
  uint32_t cp;
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '\n') ++line, start = i + 1;
    const int len = decode(text, i, cp);
    QKV_CHECK(cp != kInvalid, file + ":" + std::to_string(line), "not valid UTF-8 (byte ", i - start + 1,
              " of the line)");
    i += size_t(len);
  }
  return newlines;
}

}  // namespace qkv::utf8
