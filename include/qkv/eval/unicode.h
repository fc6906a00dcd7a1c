// qkv/eval/unicode.h - the little Unicode the scorers need, matching Python 3.11's str methods
// (sacreBLEU runs on Python): UTF-8 <-> code points, str.lower(), str.isspace()/split()/rstrip().
#pragma once
#include <string>
#include <vector>

namespace qkv::eval {

// Strict UTF-8 decode; throws qkv::Error naming `where` and the byte offset on invalid input.
std::u32string utf8_decode(const std::string& s, const std::string& where = "utf8_decode");
std::string utf8_encode(const std::u32string& s);

bool is_space(char32_t c);                      // Python str.isspace() for one code point
std::u32string to_lower(const std::u32string& s);  // Python str.lower() (no final-sigma rule)
std::u32string rstrip(const std::u32string& s);    // Python str.rstrip()
std::vector<std::u32string> split_ws(const std::u32string& s);  // Python str.split()

}  // namespace qkv::eval
