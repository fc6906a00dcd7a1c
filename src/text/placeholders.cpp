#include "qkv/text/placeholders.h"

#include <algorithm>
#include <cstring>

namespace qkv::text {

namespace {

constexpr std::string_view kOpen = "\xEF\xBD\x9F";   // U+FF5F FULLWIDTH LEFT WHITE PARENTHESIS
constexpr std::string_view kClose = "\xEF\xBD\xA0";  // U+FF60 FULLWIDTH RIGHT WHITE PARENTHESIS

bool is_alpha(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alnum(char c) { return is_alpha(c) || is_digit(c); }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool one_of(char c, const char* set) { return c != '\0' && std::strchr(set, c) != nullptr; }

// A word starts at i: the text's start, or after white space or an opening bracket or quote.
bool word_start(std::string_view s, size_t i, const char* also = "") {
  return i == 0 || is_space(s[i - 1]) || one_of(s[i - 1], "([{\"'`,") || one_of(s[i - 1], also);
}
// An option ends at j: the text's end, white space, or closing punctuation.
bool option_end(std::string_view s, size_t j) { return j == s.size() || is_space(s[j]) || one_of(s[j], ",.;:)]}\"'`="); }

size_t digits(std::string_view s, size_t i) {
  while (i < s.size() && is_digit(s[i])) ++i;
  return i;
}

// printf: returns the end of a conversion starting with '%' at i, or 0.
size_t match_printf(std::string_view s, size_t i) {
  size_t j = i + 1, n = s.size();
  if (j < n && s[j] == '%') return j + 1;
  if (size_t k = digits(s, j); k > j && k < n && s[k] == '$') j = k + 1;  // argument number n$
  // Flags; not the space flag: "100% sure" is far more common in messages than "% d".
  while (j < n && one_of(s[j], "-+#0'")) ++j;
  auto star_or_digits = [&](size_t p) {
    if (p < n && s[p] == '*') {
      size_t k = digits(s, p + 1);
      return k > p + 1 && k < n && s[k] == '$' ? k + 1 : p + 1;
    }
    return digits(s, p);
  };
  j = star_or_digits(j);                    // width
  if (j < n && s[j] == '.') j = star_or_digits(j + 1);  // precision
  if (j < n && s[j] == '<') {               // gettext's <PRIdMAX>, <PRIu64>, ...
    size_t k = j + 1;
    while (k < n && (is_alnum(s[k]) || s[k] == '_')) ++k;
    return k < n && s[k] == '>' && s.substr(j + 1, 3) == "PRI" ? k + 1 : 0;
  }
  static constexpr std::string_view kLengths[] = {"hh", "ll", "h", "l", "L", "q", "j", "z", "Z", "t"};
  for (std::string_view len : kLengths)
    if (s.substr(j, len.size()) == len) {
      j += len.size();
      break;
    }
  return j < n && one_of(s[j], "diouxXeEfFgGaAcCsSpnm") ? j + 1 : 0;
}

// --name at a word start; an argument after it (=ARG, [=ARG]) is not part of the span.
size_t match_long_option(std::string_view s, size_t i) {
  size_t n = s.size(), j = i + 2;
  if (!word_start(s, i) || j >= n || !is_alnum(s[j])) return 0;
  while (j < n && (is_alnum(s[j]) || s[j] == '_' || s[j] == '-')) ++j;
  while (s[j - 1] == '-') --j;  // "--foo-" ends before the dash
  return j;
}

// -x or -name at a word start, ending at an option boundary.
size_t match_short_option(std::string_view s, size_t i) {
  size_t n = s.size(), j = i + 1;
  if (!word_start(s, i) || j >= n || !is_alpha(s[j])) return 0;
  while (j < n && (is_alnum(s[j]) || s[j] == '_')) ++j;
  return option_end(s, j) ? j : 0;
}

size_t match_url(std::string_view s, size_t i) {
  static constexpr std::string_view kSchemes[] = {"http://", "https://", "ftp://", "file://"};
  bool any = false;
  for (std::string_view sch : kSchemes) any = any || s.substr(i, sch.size()) == sch;
  if (!any || (i > 0 && is_alnum(s[i - 1]))) return 0;
  size_t j = i;
  while (j < s.size() && !is_space(s[j]) && static_cast<unsigned char>(s[j]) < 0x80) ++j;
  while (j > i && one_of(s[j - 1], ".,;:!?)]'\"")) --j;
  return j;
}

// local@domain.tld around the '@' at `at`; returns [begin, end) or {0, 0}.
std::pair<size_t, size_t> match_email(std::string_view s, size_t at) {
  size_t b = at, e = at + 1, n = s.size();
  while (b > 0 && (is_alnum(s[b - 1]) || one_of(s[b - 1], "._%+-"))) --b;
  while (b < at && s[b] == '.') ++b;
  bool dot = false;
  while (e < n && (is_alnum(s[e]) || s[e] == '-' || (s[e] == '.' && e + 1 < n && is_alnum(s[e + 1])))) {
    dot = dot || s[e] == '.';
    ++e;
  }
  if (b == at || e == at + 1 || !dot) return {0, 0};
  return {b, e};
}

// /name... or ~/name... at a word start (also after '=': --prefix=/usr).
size_t match_path(std::string_view s, size_t i) {
  size_t n = s.size(), j = i;
  if (!word_start(s, i, "=")) return 0;
  if (s[j] == '~') ++j;
  if (j >= n || s[j] != '/' || j + 1 >= n || !(is_alnum(s[j + 1]) || one_of(s[j + 1], "._"))) return 0;
  while (j < n && (is_alnum(s[j]) || one_of(s[j], "._+-/"))) ++j;
  while (j > i && one_of(s[j - 1], ".,;:")) --j;
  return j;
}

}  // namespace

const char* span_kind_name(SpanKind k) {
  switch (k) {
    case SpanKind::printf_conversion: return "printf conversion";
    case SpanKind::long_option: return "long option";
    case SpanKind::short_option: return "short option";
    case SpanKind::url: return "url";
    case SpanKind::email: return "e-mail address";
    case SpanKind::path: return "path";
  }
  return "?";
}

std::vector<ProtectedSpan> find_protected_spans(std::string_view s) {
  std::vector<ProtectedSpan> cand;
  auto add = [&](size_t b, size_t e, SpanKind k) {
    if (e > b) cand.push_back({b, e, k});
  };
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '%') add(i, match_printf(s, i), SpanKind::printf_conversion);
    if (c == '-' && i + 1 < s.size() && s[i + 1] == '-') add(i, match_long_option(s, i), SpanKind::long_option);
    if (c == '-' && (i + 1 >= s.size() || s[i + 1] != '-')) add(i, match_short_option(s, i), SpanKind::short_option);
    if (c == 'h' || c == 'f') add(i, match_url(s, i), SpanKind::url);
    if (c == '@') {
      auto [b, e] = match_email(s, i);
      add(b, e, SpanKind::email);
    }
    if (c == '/' || c == '~') add(i, match_path(s, i), SpanKind::path);
  }
  // Earliest start first, then the longest; drop what overlaps a span already kept.
  std::sort(cand.begin(), cand.end(), [](const ProtectedSpan& a, const ProtectedSpan& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
  });
  std::vector<ProtectedSpan> out;
  for (const auto& c : cand)
    if (out.empty() || c.begin >= out.back().end) out.push_back(c);
  return out;
}

std::string placeholder(size_t k) { return std::string(kOpen) + std::to_string(k) + std::string(kClose); }

namespace {
bool has_placeholder_chars(std::string_view s) {
  return s.find(kOpen) != std::string_view::npos || s.find(kClose) != std::string_view::npos;
}
}  // namespace

Protected protect(std::string_view text) {
  Protected p;
  if (has_placeholder_chars(text)) {
    p.text = std::string(text);
    return p;
  }
  size_t at = 0;
  for (const auto& sp : find_protected_spans(text)) {
    p.text.append(text.substr(at, sp.begin - at));
    p.originals.emplace_back(text.substr(sp.begin, sp.end - sp.begin));
    p.text += placeholder(p.originals.size());
    at = sp.end;
  }
  p.text.append(text.substr(at));
  return p;
}

std::pair<std::string, std::string> protect_pair(std::string_view source, std::string_view target) {
  if (has_placeholder_chars(source) || has_placeholder_chars(target)) return {std::string(source), std::string(target)};
  // Each source span takes the leftmost unused target occurrence of the same text that overlaps
  // no occurrence already taken.
  struct Taken {
    size_t begin, end, k;
  };
  std::vector<Taken> taken;
  auto free_at = [&](size_t b, size_t e) {
    for (const auto& t : taken)
      if (b < t.end && t.begin < e) return false;
    return true;
  };
  std::string src;
  size_t at = 0, k = 0;
  for (const auto& sp : find_protected_spans(source)) {
    const std::string_view span = source.substr(sp.begin, sp.end - sp.begin);
    size_t pos = target.find(span);
    while (pos != std::string_view::npos && !free_at(pos, pos + span.size())) pos = target.find(span, pos + 1);
    if (pos == std::string_view::npos) continue;  // the translator changed it: the model learns that
    taken.push_back({pos, pos + span.size(), ++k});
    src.append(source.substr(at, sp.begin - at));
    src += placeholder(k);
    at = sp.end;
  }
  src.append(source.substr(at));
  std::sort(taken.begin(), taken.end(), [](const Taken& a, const Taken& b) { return a.begin < b.begin; });
  std::string tgt;
  at = 0;
  for (const auto& t : taken) {
    tgt.append(target.substr(at, t.begin - at));
    tgt += placeholder(t.k);
    at = t.end;
  }
  tgt.append(target.substr(at));
  return {src, tgt};
}

std::string restore(std::string_view s, const std::vector<std::string>& originals, size_t* dropped) {
  std::string out;
  size_t i = 0, lost = 0;
  while (i < s.size()) {
    size_t open = s.find(kOpen, i);
    if (open == std::string_view::npos) break;
    size_t d = open + kOpen.size(), e = digits(s, d);
    if (e == d || e - d > 9 || s.substr(e, kClose.size()) != kClose) {  // not a placeholder: keep the text
      out.append(s.substr(i, d - i));
      i = d;
      continue;
    }
    out.append(s.substr(i, open - i));
    const size_t k = std::stoul(std::string(s.substr(d, e - d)));
    if (k >= 1 && k <= originals.size())
      out += originals[k - 1];
    else
      ++lost;
    i = e + kClose.size();
  }
  out.append(s.substr(i));
  if (dropped) *dropped = lost;
  return out;
}

}  // namespace qkv::text
