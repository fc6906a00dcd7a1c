// chrF / chrF++ as sacreBLEU 2.x computes them (metrics/chrf.py, metrics/helpers.py).
#include "qkv/eval/chrf.h"

#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "corpus_refs.h"
#include "qkv/eval/bleu.h"
#include "qkv/util/unicode.h"
#include "qkv/util/utf8.h"
#include "qkv/util/error.h"

namespace qkv::eval {
namespace {

using Counts = std::unordered_map<std::u32string, int64_t>;

bool is_ascii_punct(char32_t c) {
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
         (c >= '{' && c <= '~');
}

// chrF++ words: whitespace split, then one punctuation character split off the end of a word
// (else off its start); "(hi)" -> "(hi", ")" as in sacreBLEU (its issue #124).
std::vector<std::u32string> chrf_words(const std::u32string& s) {
  std::vector<std::u32string> out;
  for (auto& w : unicode::split_ws(s)) {
    if (w.size() > 1 && is_ascii_punct(w.back())) {
      out.push_back(w.substr(0, w.size() - 1));
      out.push_back(w.substr(w.size() - 1));
    } else if (w.size() > 1 && is_ascii_punct(w.front())) {
      out.push_back(w.substr(0, 1));
      out.push_back(w.substr(1));
    } else {
      out.push_back(w);
    }
  }
  return out;
}

// Counters for char orders 1..C then word orders 1..W.
std::vector<Counts> all_ngrams(const std::u32string& s, const ChrfOptions& o) {
  std::vector<Counts> out;
  std::u32string chars;
  if (o.whitespace) {
    chars = s;
  } else {
    for (char32_t c : s)
      if (!unicode::is_space(c)) chars += c;
  }
  for (int n = 1; n <= o.char_order; ++n) {
    Counts c;
    for (size_t i = 0; i + n <= chars.size(); ++i) ++c[chars.substr(i, n)];
    out.push_back(std::move(c));
  }
  if (o.word_order > 0) {
    auto words = chrf_words(s);
    for (int n = 1; n <= o.word_order; ++n) {
      Counts c;
      for (size_t i = 0; i + n <= words.size(); ++i) {
        std::u32string key = words[i];
        for (int k = 1; k < n; ++k) key.append(U" ").append(words[i + k]);
        ++c[key];
      }
      out.push_back(std::move(c));
    }
  }
  return out;
}

}  // namespace

double chrf_from_stats(const std::vector<int64_t>& stats, int beta, bool eps_smoothing) {
  QKV_CHECK(!stats.empty() && stats.size() % 3 == 0, "chrf_from_stats",
            "expected 3 statistics per order, got ", stats.size());
  const double eps = 1e-16, b2 = double(beta) * beta;
  const size_t orders = stats.size() / 3;
  double f_sum = 0, p_sum = 0, r_sum = 0;
  int eff = 0;
  for (size_t k = 0; k < orders; ++k) {
    const int64_t nh = stats[3 * k], nr = stats[3 * k + 1], nm = stats[3 * k + 2];
    const double p = nh > 0 ? double(nm) / double(nh) : eps;
    const double r = nr > 0 ? double(nm) / double(nr) : eps;
    const double d = b2 * p + r;
    f_sum += d > 0 ? (1 + b2) * p * r / d : eps;
    if (nh > 0 && nr > 0) p_sum += p, r_sum += r, ++eff;
  }
  if (eps_smoothing) return 100.0 * f_sum / double(orders);
  if (eff == 0) return 0.0;
  const double p = p_sum / eff, r = r_sum / eff;
  if (p + r == 0) return 0.0;
  return 100.0 * (1 + b2) * p * r / (b2 * p + r);
}

ChrfScore corpus_chrf(const std::vector<std::string>& hyps,
                      const std::vector<std::vector<std::string>>& refs, const ChrfOptions& o) {
  QKV_CHECK(o.char_order >= 0 && o.word_order >= 0 && o.char_order + o.word_order > 0, "chrf",
            "expected char_order + word_order > 0, got ", o.char_order, " + ", o.word_order);
  QKV_CHECK(o.beta > 0, "chrf", "beta must be positive, got ", o.beta);
  detail::check_layout("corpus_chrf", hyps.size(), refs);
  auto prep = [&](const std::string& s, const std::string& where) {
    std::u32string u = utf8::to_u32_strict(s, where);
    return o.lowercase ? unicode::lower(u) : u;
  };
  std::vector<int64_t> totals(3 * (o.char_order + o.word_order), 0);
  std::set<size_t> nrefs;
  for (size_t i = 0; i < hyps.size(); ++i) {
    const std::string seg = "segment " + std::to_string(i + 1);
    auto seg_refs = detail::segment_refs("corpus_chrf", refs, i);
    nrefs.insert(seg_refs.size());
    auto hgrams = all_ngrams(prep(hyps[i], "corpus_chrf: hypothesis, " + seg), o);
    std::vector<int64_t> best;
    double best_f = -1.0;
    for (const std::string* ref : seg_refs) {
      auto rgrams = all_ngrams(prep(*ref, "corpus_chrf: reference, " + seg), o);
      std::vector<int64_t> stats;
      for (size_t k = 0; k < hgrams.size(); ++k) {
        int64_t nh = 0, nr = 0, nm = 0;
        for (auto& [g, c] : hgrams[k]) {
          nh += c;
          auto it = rgrams[k].find(g);
          if (it != rgrams[k].end()) nm += std::min(c, it->second);
        }
        for (auto& [g, c] : rgrams[k]) nr += c;
        // no reference n-grams of this order: the hypothesis ones are not counted either
        stats.insert(stats.end(), {rgrams[k].empty() ? 0 : nh, nr, nm});
      }
      const double f = chrf_from_stats(stats, o.beta, o.eps_smoothing);
      if (f > best_f) best_f = f, best = std::move(stats);
    }
    for (size_t k = 0; k < totals.size(); ++k) totals[k] += best[k];
  }
  ChrfScore s;
  s.stats = totals;
  s.score = chrf_from_stats(totals, o.beta, o.eps_smoothing);
  s.name = "chrF" + std::to_string(o.beta) + std::string(o.word_order, '+');
  s.nrefs = detail::nrefs_field(nrefs);
  s.signature = "nrefs:" + s.nrefs + "|case:" + (o.lowercase ? "lc" : "mixed") +
                "|eff:" + (o.eps_smoothing ? "no" : "yes") + "|nc:" +
                std::to_string(o.char_order) + "|nw:" + std::to_string(o.word_order) +
                "|space:" + (o.whitespace ? "yes" : "no") + "|version:" + kSacreBleuCompat;
  return s;
}

ChrfScore sentence_chrf(const std::string& hyp, const std::vector<std::string>& refs,
                        const ChrfOptions& opt) {
  std::vector<std::vector<std::string>> streams;
  for (const auto& r : refs) streams.push_back({r});
  return corpus_chrf({hyp}, streams, opt);
}

std::string ChrfScore::format(int width) const {
  return name + "|" + signature + " = " + detail::fixed(score, width);
}

std::string ChrfScore::json(int width) const {
  nlohmann::ordered_json j;
  j["name"] = name;
  j["score"] = std::stod(detail::fixed(score, width));
  j["signature"] = signature;
  detail::add_signature_fields(j, signature);
  j["stats"] = stats;
  j["score_exact"] = score;
  return j.dump(1);
}

}  // namespace qkv::eval
