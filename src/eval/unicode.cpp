// Unicode helpers matching Python 3.11 str semantics (tables from tools/eval/gen_unicode_tables.py).
#include "qkv/eval/unicode.h"

#include <algorithm>

#include "qkv/util/error.h"

namespace qkv::eval {
namespace {
struct LowerEntry {
  char32_t cp;
  int n;
  char32_t to[3];
};
#include "unicode_tables.inc"
}  // namespace

std::u32string utf8_decode(const std::string& s, const std::string& where) {
  std::u32string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    unsigned char b = p[i];
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    QKV_CHECK(len > 0 && i + len <= n, where, "invalid UTF-8 at byte ", i);
    char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (int k = 1; k < len; ++k) {
      QKV_CHECK((p[i + k] & 0xC0) == 0x80, where, "invalid UTF-8 at byte ", i + k);
      c = (c << 6) | (p[i + k] & 0x3F);
    }
    // reject overlong forms, surrogates and code points past U+10FFFF (as Python's strict codec)
    static constexpr char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    QKV_CHECK(c >= kMin[len] && c <= 0x10FFFF && !(c >= 0xD800 && c <= 0xDFFF), where,
              "invalid UTF-8 at byte ", i);
    out.push_back(c);
    i += len;
  }
  return out;
}

std::string utf8_encode(const std::u32string& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    if (c < 0x80) {
      out.push_back(char(c));
    } else if (c < 0x800) {
      out.push_back(char(0xC0 | (c >> 6)));
      out.push_back(char(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(char(0xE0 | (c >> 12)));
      out.push_back(char(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(char(0x80 | (c & 0x3F)));
    } else {
      out.push_back(char(0xF0 | (c >> 18)));
      out.push_back(char(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(char(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(char(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

bool is_space(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  return std::binary_search(std::begin(kSpaceTable), std::end(kSpaceTable), c);
}

std::u32string to_lower(const std::u32string& s) {
  std::u32string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    if (c < 0x80) {
      out.push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
      continue;
    }
    auto it = std::lower_bound(std::begin(kLowerTable), std::end(kLowerTable), c,
                               [](const LowerEntry& e, char32_t v) { return e.cp < v; });
    if (it != std::end(kLowerTable) && it->cp == c) {
      out.append(it->to, it->to + it->n);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::u32string rstrip(const std::u32string& s) {
  size_t end = s.size();
  while (end > 0 && is_space(s[end - 1])) --end;
  return s.substr(0, end);
}

std::vector<std::u32string> split_ws(const std::u32string& s) {
  std::vector<std::u32string> out;
  size_t i = 0, n = s.size();
  while (i < n) {
    while (i < n && is_space(s[i])) ++i;
    size_t j = i;
    while (j < n && !is_space(s[j])) ++j;
    if (j > i) out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace qkv::eval
