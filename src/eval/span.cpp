// SQuAD-style span exact match and F1 (SQuAD v2.0 evaluation script definitions).
#include "qkv/eval/span.h"

#include <algorithm>
#include <map>

#include "qkv/util/unicode.h"
#include "qkv/util/utf8.h"
#include "qkv/util/error.h"

namespace qkv::eval {
namespace {

bool is_ascii_punct(char32_t c) {
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
         (c >= '{' && c <= '~');
}

// Python's \w for the article rule: letters, digits, underscore. Outside ASCII every code point
// that is not whitespace, Latin-1 punctuation/symbols or General Punctuation counts as a letter.
bool is_word(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  if (unicode::is_space(c)) return false;
  if (c >= 0xA1 && c <= 0xBF && c != 0xAA && c != 0xB5 && c != 0xBA && c != 0xB2 && c != 0xB3 && c != 0xB9 && c != 0xBC && c != 0xBD && c != 0xBE) return false;
  if (c == 0xD7 || c == 0xF7) return false;
  if (c >= 0x2000 && c <= 0x206F) return false;
  return true;
}

std::vector<std::u32string> tokens(const std::string& s) {
  std::u32string u = unicode::lower(utf8::to_u32_strict(s, "normalize_answer"));
  std::u32string np;  // punctuation removed
  for (char32_t c : u)
    if (!is_ascii_punct(c)) np += c;
  std::u32string na;  // \b(a|an|the)\b -> " "
  for (size_t i = 0; i < np.size();) {
    bool hit = false;
    if (i == 0 || !is_word(np[i - 1])) {
      for (const std::u32string art : {U"the", U"an", U"a"}) {
        const size_t e = i + art.size();
        if (np.compare(i, art.size(), art) == 0 && (e == np.size() || !is_word(np[e]))) {
          na += U' ';
          i = e;
          hit = true;
          break;
        }
      }
    }
    if (!hit) na += np[i++];
  }
  return unicode::split_ws(na);
}

}  // namespace

std::string normalize_answer(const std::string& s) {
  std::u32string out;
  for (auto& t : tokens(s)) {
    if (!out.empty()) out += U' ';
    out += t;
  }
  return utf8::from_u32(out);
}

double span_exact_match(const std::string& pred, const std::vector<std::string>& golds) {
  QKV_CHECK(!golds.empty(), "span_exact_match", "expected at least one gold answer, got none");
  const std::string p = normalize_answer(pred);
  for (auto& g : golds)
    if (normalize_answer(g) == p) return 1.0;
  return 0.0;
}

double span_f1(const std::string& pred, const std::vector<std::string>& golds) {
  QKV_CHECK(!golds.empty(), "span_f1", "expected at least one gold answer, got none");
  const auto pt = tokens(pred);
  double best = 0.0;
  for (auto& g : golds) {
    const auto gt = tokens(g);
    double f = 0.0;
    if (pt.empty() || gt.empty()) {
      f = pt == gt ? 1.0 : 0.0;  // no-answer: 1 only if both are empty
    } else {
      std::map<std::u32string, int> count;
      for (auto& t : gt) ++count[t];
      int same = 0;
      for (auto& t : pt)
        if (count[t] > 0) --count[t], ++same;
      if (same > 0) {
        const double p = double(same) / pt.size(), r = double(same) / gt.size();
        f = 2 * p * r / (p + r);
      }
    }
    best = std::max(best, f);
  }
  return best;
}

SpanScores span_scores(const std::vector<std::string>& preds,
                       const std::vector<std::vector<std::string>>& golds) {
  QKV_CHECK(preds.size() == golds.size() && !preds.empty(), "span_scores",
            "expected as many predictions as gold answer sets (> 0), got ", preds.size(), " and ",
            golds.size());
  SpanScores s;
  for (size_t i = 0; i < preds.size(); ++i) {
    s.exact_match += span_exact_match(preds[i], golds[i]);
    s.f1 += span_f1(preds[i], golds[i]);
  }
  s.exact_match *= 100.0 / preds.size();
  s.f1 *= 100.0 / preds.size();
  return s;
}

}  // namespace qkv::eval
