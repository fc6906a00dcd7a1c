// qkv/text/pretokenize.h - pre-tokenisers: GPT-2's pattern (implemented by hand, no regex
// library), whitespace splitting, and GPT-2's bytes <-> unicode table.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qkv::text {

// GPT-2's pattern, exactly as the JavaScript reference (gpt-3-encoder) runs it with the u flag:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// \p{L} / \p{N}: general categories L* / N* (Unicode 14 tables); \s: JavaScript's white space
// (see unicode::is_js_space). Invalid UTF-8: every byte that starts no well-formed sequence is
// one character of class "other" (like U+FFFD would be), so it joins a punctuation run; its
// byte is kept as is, so byte-level BPE encodes and decodes it exactly.
// Calls f(piece) for each match, in order; the pieces concatenate back to `text`.
template <typename F>
void gpt2_pretokenize(std::string_view text, F&& f);
std::vector<std::string_view> gpt2_pretokenize(std::string_view text);

// Splits on JavaScript white space (unicode::is_js_space) and U+0085; pieces never contain it.
std::vector<std::string_view> whitespace_split(std::string_view text);

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the other 68 bytes to
// U+0100.. in byte order. byte_to_unicode()[b] is the code point; unicode_to_byte(cp) is -1 for
// a code point outside the table.
const std::array<uint32_t, 256>& byte_to_unicode();
int unicode_to_byte(uint32_t cp);
std::string bytes_to_unicode_string(std::string_view bytes);  // UTF-8 of the mapped code points

namespace detail {
enum class CharClass : uint8_t { Letter, Number, Space, Other };
// Class and byte length of the character at s[i].
void classify(std::string_view s, size_t i, CharClass& cls, int& len);
size_t gpt2_match(std::string_view s, size_t i);  // length of the match starting at i (>= 1)
}  // namespace detail

template <typename F>
void gpt2_pretokenize(std::string_view text, F&& f) {
  for (size_t i = 0; i < text.size();) {
    size_t n = detail::gpt2_match(text, i);
    f(text.substr(i, n));
    i += n;
  }
}

}  // namespace qkv::text
