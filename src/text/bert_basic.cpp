// BERT's BasicTokenizer, step by step as in tokenization.py.
#include "qkv/util/unicode.h"
#include "qkv/util/utf8.h"
#include "qkv/text/wordpiece.h"

namespace qkv::text {

bool bert_is_chinese_char(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

bool bert_is_punctuation(uint32_t cp) {
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
      (cp >= 123 && cp <= 126))
    return true;
  return cp >= 0x80 && unicode::is_punct_category(cp);
}

namespace {

bool bert_is_whitespace(uint32_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || unicode::is_space_separator(c);
}
bool bert_is_control(uint32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  return unicode::is_other_category(c);
}
// Python's str.isspace(), which str.split() uses.
bool py_isspace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace

std::vector<std::string> bert_basic_tokenize(std::string_view text, const BertNormalizeOptions& opt) {
  std::u32string s = utf8::to_u32_dropping_invalid(text);
  std::u32string t;
  t.reserve(s.size() + 16);
  for (char32_t c : s) {
    if (opt.clean_text) {
      if (c == 0 || c == 0xFFFD || bert_is_control(c)) continue;
      if (bert_is_whitespace(c)) { t += U' '; continue; }
    }
    if (opt.handle_chinese_chars && bert_is_chinese_char(c)) {
      t += U' ';
      t += c;
      t += U' ';
    } else {
      t += c;
    }
  }
  std::vector<std::string> out;
  std::u32string word;
  auto emit_word = [&]() {
    if (word.empty()) return;
    std::u32string w = word;
    word.clear();
    if (opt.lowercase) w = unicode::lower(w);
    if (opt.strip_accents) {
      std::u32string d = unicode::nfd(w);
      w.clear();
      for (char32_t c : d)
        if (!unicode::is_nonspacing_mark(c)) w += c;
    }
    // Punctuation characters become tokens of their own.
    std::u32string piece;
    for (char32_t c : w) {
      if (bert_is_punctuation(c)) {
        if (!piece.empty()) out.push_back(utf8::from_u32(piece)), piece.clear();
        out.push_back(utf8::from_u32(std::u32string(1, c)));
      } else if (py_isspace(c)) {  // cannot come out of lower/NFD, kept for exactness
        if (!piece.empty()) out.push_back(utf8::from_u32(piece)), piece.clear();
      } else {
        piece += c;
      }
    }
    if (!piece.empty()) out.push_back(utf8::from_u32(piece));
  };
  for (char32_t c : t) {
    if (py_isspace(c)) emit_word();
    else word += c;
  }
  emit_word();
  return out;
}

}  // namespace qkv::text
