// GPT-2 pattern matcher: one function per alternative, tried in the pattern's order.
#include "qkv/text/pretokenize.h"

#include "qkv/util/unicode.h"
#include "qkv/util/utf8.h"

namespace qkv::text {
namespace detail {
namespace {

struct AsciiTable {
  CharClass c[128];
  AsciiTable() {
    for (int b = 0; b < 128; ++b) {
      if (unicode::is_js_space(b)) c[b] = CharClass::Space;
      else if (unicode::is_letter(b)) c[b] = CharClass::Letter;
      else if (unicode::is_number(b)) c[b] = CharClass::Number;
      else c[b] = CharClass::Other;
    }
  }
};
const AsciiTable kAscii;

}  // namespace

void classify(std::string_view s, size_t i, CharClass& cls, int& len) {
  unsigned char b = s[i];
  if (b < 0x80) {
    cls = kAscii.c[b];
    len = 1;
    return;
  }
  uint32_t cp;
  len = utf8::decode(s, i, cp);
  if (cp == utf8::kInvalid) cls = CharClass::Other;
  else if (unicode::is_js_space(cp)) cls = CharClass::Space;
  else if (unicode::is_letter(cp)) cls = CharClass::Letter;
  else if (unicode::is_number(cp)) cls = CharClass::Number;
  else cls = CharClass::Other;
}

namespace {
// End of the run of characters of class `c` starting at i.
size_t run_end(std::string_view s, size_t i, CharClass c) {
  CharClass k;
  int len;
  while (i < s.size()) {
    classify(s, i, k, len);
    if (k != c) break;
    i += len;
  }
  return i;
}
}  // namespace

size_t gpt2_match(std::string_view s, size_t i) {
  const size_t n = s.size();
  // 's|'t|'re|'ve|'m|'ll|'d
  if (s[i] == '\'' && i + 1 < n) {
    char a = s[i + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 < n) {
      char b = s[i + 2];
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    }
  }
  CharClass c;
  int len;
  classify(s, i, c, len);
  //  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+   (the optional prefix is a plain space)
  if (c != CharClass::Space) return run_end(s, i, c) - i;
  if (s[i] == ' ' && i + 1 < n) {
    CharClass c2;
    int len2;
    classify(s, i + 1, c2, len2);
    if (c2 != CharClass::Space) return run_end(s, i + 1, c2) - i;
  }
  // \s+(?!\S) | \s+ : the whole run if it ends the text or is one character long, otherwise all
  // but its last character (which then prefixes the next word or stands alone).
  size_t j = i, last = i;
  while (j < n) {
    CharClass k;
    int l;
    classify(s, j, k, l);
    if (k != CharClass::Space) break;
    last = j;
    j += l;
  }
  if (j == n || last == i) return j - i;
  return last - i;
}

}  // namespace detail

std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
  std::vector<std::string_view> out;
  gpt2_pretokenize(text, [&](std::string_view p) { out.push_back(p); });
  return out;
}

std::vector<std::string_view> whitespace_split(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = std::string_view::npos;
  for (size_t i = 0; i < text.size();) {
    uint32_t cp;
    int len = utf8::decode(text, i, cp);
    bool sp = cp != utf8::kInvalid && (unicode::is_js_space(cp) || cp == 0x85);
    if (sp && start != std::string_view::npos) {
      out.push_back(text.substr(start, i - start));
      start = std::string_view::npos;
    } else if (!sp && start == std::string_view::npos) {
      start = i;
    }
    i += len;
  }
  if (start != std::string_view::npos) out.push_back(text.substr(start));
  return out;
}

const std::array<uint32_t, 256>& byte_to_unicode() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t extra = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = printable ? uint32_t(b) : 256 + extra++;
    }
    return t;
  }();
  return table;
}

int unicode_to_byte(uint32_t cp) {
  static const std::array<int16_t, 324> inv = [] {
    std::array<int16_t, 324> t;
    t.fill(-1);
    for (int b = 0; b < 256; ++b) t[byte_to_unicode()[b]] = int16_t(b);
    return t;
  }();
  return cp < inv.size() ? inv[cp] : -1;
}

std::string bytes_to_unicode_string(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) utf8::append(out, byte_to_unicode()[b]);
  return out;
}

}  // namespace qkv::text
