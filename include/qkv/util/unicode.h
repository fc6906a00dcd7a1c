// qkv/util/unicode.h - qkv's one Unicode module: the properties and string operations the
// tokenizers and the scorers need, from tables generated out of Python's unicodedata and str
// methods (Unicode 14.0; tools/gen_unicode_tables.py). Using the same database as the Python
// references (and sacreBLEU, which runs on Python) makes qkv and them agree code point for code
// point.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qkv::unicode {

const char* version();  // "14.0.0"

bool is_letter(uint32_t cp);          // general category L*
bool is_number(uint32_t cp);          // N*
bool is_punct_category(uint32_t cp);  // P*
bool is_other_category(uint32_t cp);  // C* (Cc Cf Cs Co Cn)
bool is_space_separator(uint32_t cp); // Zs
bool is_nonspacing_mark(uint32_t cp); // Mn
bool is_cased(uint32_t cp);           // as CPython's str.lower() sees it (Final_Sigma rule)
bool is_case_ignorable(uint32_t cp);
int combining_class(uint32_t cp);     // canonical combining class, 0 for most

// JavaScript's \s (ECMAScript WhiteSpace + LineTerminator): TAB VT FF SP NBSP ZWNBSP(U+FEFF),
// the other Zs, LF CR U+2028 U+2029. Not the same set as Unicode White_Space (no U+0085).
bool is_js_space(uint32_t cp);

// Python's str.isspace() for one code point (what str.split() and str.strip() split on).
bool is_space(uint32_t cp);

// Python's str.lower() of a whole string: full case mapping plus the Final_Sigma context rule.
std::u32string lower(std::u32string_view s);
std::u32string rstrip(std::u32string_view s);              // Python str.rstrip()
std::vector<std::u32string> split_ws(std::u32string_view s);  // Python str.split()
// Canonical decomposition (NFD): full decompositions, Hangul, canonical reordering.
std::u32string nfd(std::u32string_view s);

}  // namespace qkv::unicode
