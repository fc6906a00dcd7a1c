// Unicode property lookups: a 64K flag table for the BMP (built once), binary search above it.
#include "qkv/util/unicode.h"

#include <algorithm>
#include <array>
#include <vector>

#include "unicode_tables.h"

namespace qkv::unicode {
namespace t = unicode_tables;
namespace {

enum : uint8_t { kL = 1, kN = 2, kP = 4, kC = 8, kZs = 16, kMn = 32, kCased = 64, kIgn = 128 };

bool in_ranges(const t::Range* r, size_t n, uint32_t cp) {
  const t::Range* end = r + n;
  auto it = std::upper_bound(r, end, cp, [](uint32_t v, const t::Range& x) { return v < x.lo; });
  return it != r && cp <= (it - 1)->hi;
}

struct Bmp {
  std::array<uint8_t, 0x10000> flags{};
  Bmp() {
    auto mark = [&](const t::Range* r, size_t n, uint8_t bit) {
      for (size_t i = 0; i < n && r[i].lo < 0x10000; ++i)
        for (uint32_t c = r[i].lo; c <= std::min<uint32_t>(r[i].hi, 0xFFFF); ++c) flags[c] |= bit;
    };
    mark(t::kLetter, t::kLetterCount, kL);
    mark(t::kNumber, t::kNumberCount, kN);
    mark(t::kPunct, t::kPunctCount, kP);
    mark(t::kControl, t::kControlCount, kC);
    mark(t::kSpaceSep, t::kSpaceSepCount, kZs);
    mark(t::kNonspacing, t::kNonspacingCount, kMn);
    mark(t::kCased, t::kCasedCount, kCased);
    mark(t::kCaseIgnorable, t::kCaseIgnorableCount, kIgn);
  }
};
const Bmp& bmp() {
  static const Bmp b;
  return b;
}

bool has(uint32_t cp, uint8_t bit, const t::Range* r, size_t n) {
  if (cp < 0x10000) return bmp().flags[cp] & bit;
  return cp <= 0x10FFFF && in_ranges(r, n, cp);
}

const t::MapEntry* find_map(const t::MapEntry* m, size_t n, uint32_t cp) {
  auto it = std::lower_bound(m, m + n, cp, [](const t::MapEntry& e, uint32_t v) { return e.cp < v; });
  return it != m + n && it->cp == cp ? it : nullptr;
}

// Hangul syllable decomposition constants (Unicode 3.12).
constexpr uint32_t SBase = 0xAC00, LBase = 0x1100, VBase = 0x1161, TBase = 0x11A7;
constexpr uint32_t LCount = 19, VCount = 21, TCount = 28, NCount = VCount * TCount,
                   SCount = LCount * NCount;

}  // namespace

const char* version() { return t::kUnicodeVersion; }
bool is_letter(uint32_t cp) { return has(cp, kL, t::kLetter, t::kLetterCount); }
bool is_number(uint32_t cp) { return has(cp, kN, t::kNumber, t::kNumberCount); }
bool is_punct_category(uint32_t cp) { return has(cp, kP, t::kPunct, t::kPunctCount); }
bool is_other_category(uint32_t cp) {
  return cp > 0x10FFFF || has(cp, kC, t::kControl, t::kControlCount);
}
bool is_space_separator(uint32_t cp) { return has(cp, kZs, t::kSpaceSep, t::kSpaceSepCount); }
bool is_nonspacing_mark(uint32_t cp) { return has(cp, kMn, t::kNonspacing, t::kNonspacingCount); }
bool is_cased(uint32_t cp) { return has(cp, kCased, t::kCased, t::kCasedCount); }
bool is_case_ignorable(uint32_t cp) {
  return has(cp, kIgn, t::kCaseIgnorable, t::kCaseIgnorableCount);
}

bool is_space(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
  return in_ranges(t::kPySpace, t::kPySpaceCount, cp);
}

std::u32string rstrip(std::u32string_view s) {
  size_t end = s.size();
  while (end > 0 && is_space(s[end - 1])) --end;
  return std::u32string(s.substr(0, end));
}

std::vector<std::u32string> split_ws(std::u32string_view s) {
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

int combining_class(uint32_t cp) {
  auto end = t::kCcc + t::kCccCount;
  auto it = std::upper_bound(t::kCcc, end, cp, [](uint32_t v, const t::CccRange& x) { return v < x.lo; });
  return it != t::kCcc && cp <= (it - 1)->hi ? int((it - 1)->ccc) : 0;
}

bool is_js_space(uint32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0xA0: case 0x1680:
    case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000: case 0xFEFF:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

std::u32string lower(std::u32string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    uint32_t c = s[i];
    if (c < 0x80) {
      out += char32_t(c >= 'A' && c <= 'Z' ? c + 32 : c);
      continue;
    }
    if (c == 0x3A3) {  // CPython handle_capital_sigma: cased ignorable* Σ !(ignorable* cased)
      size_t j = i;
      bool fin = false;
      while (j > 0 && is_case_ignorable(s[j - 1])) --j;
      fin = j > 0 && is_cased(s[j - 1]);
      if (fin) {
        size_t k = i + 1;
        while (k < s.size() && is_case_ignorable(s[k])) ++k;
        fin = k == s.size() || !is_cased(s[k]);
      }
      out += char32_t(fin ? 0x3C2 : 0x3C3);
      continue;
    }
    if (const t::MapEntry* e = find_map(t::kLower, t::kLowerCount, c)) {
      for (uint32_t k = 0; k < e->len; ++k) out += char32_t(t::kLowerPool[e->offset + k]);
    } else {
      out += char32_t(c);
    }
  }
  return out;
}

std::u32string nfd(std::u32string_view s) {
  std::u32string out;
  out.reserve(s.size() + 8);
  for (char32_t ch : s) {
    uint32_t c = ch;
    if (c < 0xC0) {
      out += ch;
    } else if (c >= SBase && c < SBase + SCount) {
      uint32_t si = c - SBase;
      out += char32_t(LBase + si / NCount);
      out += char32_t(VBase + (si % NCount) / TCount);
      if (si % TCount) out += char32_t(TBase + si % TCount);
    } else if (const t::MapEntry* e = find_map(t::kNfd, t::kNfdCount, c)) {
      for (uint32_t k = 0; k < e->len; ++k) out += char32_t(t::kNfdPool[e->offset + k]);
    } else {
      out += ch;
    }
  }
  // Canonical ordering: stable sort of each run of non-starters by combining class.
  for (size_t i = 0; i < out.size();) {
    if (out[i] < 0x300 || combining_class(out[i]) == 0) { ++i; continue; }
    size_t j = i;
    while (j < out.size() && out[j] >= 0x300 && combining_class(out[j]) != 0) ++j;
    if (j - i > 1)
      std::stable_sort(out.begin() + i, out.begin() + j, [](char32_t a, char32_t b) {
        return combining_class(a) < combining_class(b);
      });
    i = j;
  }
  return out;
}

}  // namespace qkv::unicode
