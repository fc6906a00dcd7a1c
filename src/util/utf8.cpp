#include "qkv/util/utf8.h"

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

}  // namespace qkv::utf8
