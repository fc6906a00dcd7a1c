// qkv/util/utf8.h - strict UTF-8 decoding (Unicode 14 Table 3-7: no overlongs, no surrogates,
// nothing above U+10FFFF). Invalid input is never an error here: each byte that does not start a
// well-formed sequence is reported as one unit of its own (cp == kInvalid), so callers decide.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace qkv::utf8 {

inline constexpr uint32_t kInvalid = 0xFFFFFFFFu;

// Decodes the sequence starting at s[i] (i < n). Returns its length in bytes (1..4) and sets cp;
// for a byte that starts no well-formed sequence, returns 1 and sets cp = kInvalid.
inline int decode(const unsigned char* s, size_t n, size_t i, uint32_t& cp) {
  unsigned b0 = s[i];
  if (b0 < 0x80) { cp = b0; return 1; }
  auto cont = [&](size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) {
    return i + k < n && s[i + k] >= lo && s[i + k] <= hi;
  };
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    if (cont(1)) { cp = ((b0 & 0x1F) << 6) | (s[i + 1] & 0x3F); return 2; }
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    unsigned lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
    if (cont(1, lo, hi) && cont(2)) {
      cp = ((b0 & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
      return 3;
    }
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    unsigned lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
    if (cont(1, lo, hi) && cont(2) && cont(3)) {
      cp = ((b0 & 0x07) << 18) | ((s[i + 1] & 0x3F) << 12) | ((s[i + 2] & 0x3F) << 6) |
           (s[i + 3] & 0x3F);
      return 4;
    }
  }
  cp = kInvalid;
  return 1;
}

inline int decode(std::string_view s, size_t i, uint32_t& cp) {
  return decode(reinterpret_cast<const unsigned char*>(s.data()), s.size(), i, cp);
}

inline void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

inline bool is_valid(std::string_view s) {
  uint32_t cp;
  for (size_t i = 0; i < s.size();) {
    i += decode(s, i, cp);
    if (cp == kInvalid) return false;
  }
  return true;
}

// Code points of s; bytes of invalid sequences are dropped (Python's errors="ignore").
inline std::u32string to_u32_dropping_invalid(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  uint32_t cp;
  for (size_t i = 0; i < s.size();) {
    i += decode(s, i, cp);
    if (cp != kInvalid) out += char32_t(cp);
  }
  return out;
}

// s with each maximal subpart of an ill-formed sequence replaced by U+FFFD (Unicode's recommended
// practice, Python's errors="replace"): a lead byte and the continuation bytes that could still
// have completed it are one replacement; any other invalid byte is one of its own.
inline std::string replace_invalid(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    const int len = decode(b, s.size(), i, cp);
    if (cp != kInvalid) {
      out.append(s.data() + i, size_t(len));
      i += size_t(len);
      continue;
    }
    // The longest prefix of a well-formed sequence starting at b[i] (at least the byte itself).
    const unsigned b0 = b[i];
    const int need = b0 >= 0xC2 && b0 <= 0xDF ? 2 : b0 >= 0xE0 && b0 <= 0xEF ? 3 : b0 >= 0xF0 && b0 <= 0xF4 ? 4 : 1;
    size_t k = 1;
    for (; int(k) < need && i + k < s.size(); ++k) {
      const unsigned lo = k > 1 ? 0x80 : b0 == 0xE0 ? 0xA0 : b0 == 0xF0 ? 0x90 : 0x80;
      const unsigned hi = k > 1 ? 0xBF : b0 == 0xED ? 0x9F : b0 == 0xF4 ? 0x8F : 0xBF;
      if (b[i + k] < lo || b[i + k] > hi) break;
    }
    append(out, 0xFFFD);
    i += k;
  }
  return out;
}

// Code points of s, which must be valid UTF-8: throws qkv::Error naming `where` and the byte
// offset of the first invalid sequence (Python's strict codec).
std::u32string to_u32_strict(std::string_view s, const std::string& where);

// Checks that `text`, lines of `file` from line `first_line` on, is valid UTF-8; throws qkv::Error
// "FILE:LINE: not valid UTF-8 (byte B of the line)" at the first line that is not. Returns the
// number of '\n' in text, for the caller's count of lines.
uint64_t check_lines(std::string_view text, const std::string& file, uint64_t first_line = 1);

inline std::string from_u32(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append(out, uint32_t(c));
  return out;
}

}  // namespace qkv::utf8
