// Corpus BLEU as sacreBLEU 2.x computes it (metrics/bleu.py, tokenizers/tokenizer_13a.py).
#include "qkv/eval/bleu.h"

#include <cmath>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "corpus_refs.h"
#include "qkv/util/unicode.h"
#include "qkv/util/utf8.h"
#include "qkv/util/error.h"

namespace qkv::eval {

const char* const kSacreBleuCompat = "2.x-qkv";

namespace {

bool is_digit(char32_t c) { return c >= '0' && c <= '9'; }

// ASCII punctuation split off by 13a's first rule: { | } ~ [ \ ] ^ _ ` space ! " # $ % & ( ) * +
// : ; < = > ? @ /   (not ' , - . : those have their own rules or stay attached).
bool is_13a_symbol(char32_t c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
         (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

void replace_all(std::u32string& s, const std::u32string& from, const std::u32string& to) {
  std::u32string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::u32string::npos; pos = hit + from.size())
    out.append(s, pos, hit - pos).append(to);
  out.append(s, pos, std::u32string::npos);
  s.swap(out);
}

// The four mteval-v13a regex rules, each a left-to-right non-overlapping scan like re.sub.
std::u32string rules_13a(const std::u32string& in) {
  std::u32string a;
  for (char32_t c : in) {
    if (is_13a_symbol(c)) {
      a += U' ';
      a += c;
      a += U' ';
    } else {
      a += c;
    }
  }
  auto is_pc = [](char32_t c) { return c == U'.' || c == U','; };
  std::u32string b;  // ([^0-9])([.,]) -> "\1 \2 "
  for (size_t i = 0; i < a.size();) {
    if (i + 1 < a.size() && !is_digit(a[i]) && is_pc(a[i + 1])) {
      b += a[i], b += U' ', b += a[i + 1], b += U' ', i += 2;
    } else {
      b += a[i++];
    }
  }
  std::u32string c;  // ([.,])([^0-9]) -> " \1 \2"
  for (size_t i = 0; i < b.size();) {
    if (i + 1 < b.size() && is_pc(b[i]) && !is_digit(b[i + 1])) {
      c += U' ', c += b[i], c += U' ', c += b[i + 1], i += 2;
    } else {
      c += b[i++];
    }
  }
  std::u32string d;  // ([0-9])(-) -> "\1 \2 "
  for (size_t i = 0; i < c.size();) {
    if (i + 1 < c.size() && is_digit(c[i]) && c[i + 1] == U'-') {
      d += c[i], d += U' ', d += U'-', d += U' ', i += 2;
    } else {
      d += c[i++];
    }
  }
  return d;
}

std::u32string tokenize_13a_u32(std::u32string s) {
  replace_all(s, U"<skipped>", U"");
  replace_all(s, U"-\n", U"");
  replace_all(s, U"\n", U" ");
  replace_all(s, U"&quot;", U"\"");
  replace_all(s, U"&amp;", U"&");
  replace_all(s, U"&lt;", U"<");
  replace_all(s, U"&gt;", U">");
  return rules_13a(U" " + s + U" ");
}

// Tokens of one preprocessed segment (lowercase, rstrip, tokenize, split).
std::vector<std::u32string> segment_tokens(const std::string& line, const BleuOptions& opt,
                                           const std::string& where) {
  std::u32string s = utf8::to_u32_strict(line, where);
  if (opt.lowercase) s = unicode::lower(s);
  s = unicode::rstrip(s);
  if (opt.tokenize == "13a") s = tokenize_13a_u32(s);
  return unicode::split_ws(s);
}

// n-gram -> count for n = 1..max_order; key = tokens joined by U+110000 (never in decoded text).
using NgramCounts = std::unordered_map<std::u32string, int64_t>;
NgramCounts ngrams(const std::vector<std::u32string>& toks, int max_order) {
  NgramCounts out;
  for (int n = 1; n <= max_order; ++n) {
    for (size_t i = 0; i + n <= toks.size(); ++i) {
      std::u32string key = toks[i];
      for (int k = 1; k < n; ++k) key.append(1, char32_t(0x110000)).append(toks[i + k]);
      ++out[key];
    }
  }
  return out;
}

int ngram_order(const std::u32string& key) {
  int n = 1;
  for (char32_t c : key) n += c == char32_t(0x110000);
  return n;
}

double smooth_default(const BleuOptions& opt) {
  if (opt.smooth_value >= 0) return opt.smooth_value;
  return opt.smooth == BleuSmooth::Floor ? 0.1 : opt.smooth == BleuSmooth::AddK ? 1.0 : 0.0;
}

std::string signature(const BleuOptions& opt, const std::string& nrefs) {
  static const char* names[] = {"none", "floor", "add-k", "exp"};
  std::string smooth = names[int(opt.smooth)];
  if (opt.smooth == BleuSmooth::Floor || opt.smooth == BleuSmooth::AddK)
    smooth.append("[").append(detail::fixed(smooth_default(opt), 2)).append("]");
  return "nrefs:" + nrefs + "|case:" + (opt.lowercase ? "lc" : "mixed") +
         "|eff:" + (opt.effective_order ? "yes" : "no") + "|tok:" + opt.tokenize +
         "|smooth:" + smooth + "|version:" + kSacreBleuCompat;
}

void check_options(const BleuOptions& opt) {
  QKV_CHECK(opt.tokenize == "13a" || opt.tokenize == "none", "bleu",
            "tokenize must be '13a' or 'none', got '", opt.tokenize, "'");
  QKV_CHECK(opt.max_order >= 1, "bleu", "max_order must be >= 1, got ", opt.max_order);
}

}  // namespace

std::string tokenize_13a(const std::string& line) {
  std::u32string s = tokenize_13a_u32(utf8::to_u32_strict(line, "tokenize_13a"));
  std::u32string joined;
  for (const auto& t : unicode::split_ws(s)) {
    if (!joined.empty()) joined += U' ';
    joined += t;
  }
  return utf8::from_u32(joined);
}

BleuScore compute_bleu(std::vector<int64_t> correct, std::vector<int64_t> total, int64_t hyp_len,
                       int64_t ref_len, const BleuOptions& opt) {
  const int N = opt.max_order;
  QKV_CHECK(int(correct.size()) == N && int(total.size()) == N, "compute_bleu",
            "expected ", N, " counts and totals, got ", correct.size(), " and ", total.size());
  BleuScore r;
  r.hyp_len = hyp_len;
  r.ref_len = ref_len;
  r.ratio = ref_len ? double(hyp_len) / double(ref_len) : 0.0;
  r.bp = hyp_len < ref_len ? (hyp_len > 0 ? std::exp(1.0 - double(ref_len) / double(hyp_len)) : 0.0)
                           : 1.0;
  r.precisions.assign(N, 0.0);
  r.counts.assign(correct.begin(), correct.end());
  r.totals.assign(total.begin(), total.end());
  bool any = false;
  for (auto c : correct) any |= c != 0;
  if (!any) return r;  // no match at all: 0 whatever the smoothing (sacreBLEU #141)

  const double k = smooth_default(opt);
  double halvings = 1.0;  // 'exp': the n-th zero precision becomes 1 / (2^n * total)
  int used = N;
  for (int n = 0; n < N; ++n) {
    if (opt.smooth == BleuSmooth::AddK && n > 0) r.counts[n] += k, r.totals[n] += k;
    if (r.totals[n] == 0) break;
    if (opt.effective_order) used = n + 1;
    if (r.counts[n] != 0) {
      r.precisions[n] = 100.0 * r.counts[n] / r.totals[n];
    } else if (opt.smooth == BleuSmooth::Exp) {
      halvings *= 2.0;
      r.precisions[n] = 100.0 / (halvings * r.totals[n]);
    } else if (opt.smooth == BleuSmooth::Floor) {
      r.precisions[n] = 100.0 * k / r.totals[n];
    }
  }
  double log_sum = 0.0;  // a zero precision contributes sacreBLEU's my_log(0) = -9999999999
  for (int n = 0; n < used; ++n)
    log_sum += r.precisions[n] > 0 ? std::log(r.precisions[n]) : -9999999999.0;
  r.score = r.bp * std::exp(log_sum / used);
  return r;
}

BleuScore corpus_bleu(const std::vector<std::string>& hyps,
                      const std::vector<std::vector<std::string>>& refs, const BleuOptions& opt) {
  check_options(opt);
  detail::check_layout("corpus_bleu", hyps.size(), refs);
  const int N = opt.max_order;
  std::vector<int64_t> correct(N, 0), total(N, 0);
  int64_t hyp_len = 0, ref_len = 0;
  std::set<size_t> nrefs;
  for (size_t i = 0; i < hyps.size(); ++i) {
    const std::string seg = "segment " + std::to_string(i + 1);
    auto seg_refs = detail::segment_refs("corpus_bleu", refs, i);
    nrefs.insert(seg_refs.size());
    NgramCounts best;  // per n-gram the largest count in any one reference (clipping bound)
    std::vector<int64_t> lens;
    for (const std::string* ref : seg_refs) {
      auto toks = segment_tokens(*ref, opt, "corpus_bleu: reference, " + seg);
      lens.push_back(int64_t(toks.size()));
      for (auto& [g, c] : ngrams(toks, N)) {
        auto& b = best[g];
        b = std::max(b, c);
      }
    }
    auto htoks = segment_tokens(hyps[i], opt, "corpus_bleu: hypothesis, " + seg);
    const int64_t hl = int64_t(htoks.size());
    int64_t closest = -1;  // closest reference length, the shorter one on a tie
    for (int64_t l : lens)
      if (closest < 0 || std::llabs(hl - l) < std::llabs(hl - closest) ||
          (std::llabs(hl - l) == std::llabs(hl - closest) && l < closest))
        closest = l;
    hyp_len += hl;
    ref_len += closest;
    for (auto& [g, c] : ngrams(htoks, N)) {
      const int n = ngram_order(g) - 1;
      total[n] += c;
      auto it = best.find(g);
      if (it != best.end()) correct[n] += std::min(c, it->second);
    }
  }
  BleuScore r = compute_bleu(correct, total, hyp_len, ref_len, opt);
  r.nrefs = detail::nrefs_field(nrefs);
  r.signature = signature(opt, r.nrefs);
  return r;
}

BleuOptions sentence_bleu_options() {
  BleuOptions o;
  o.effective_order = true;
  return o;
}

BleuScore sentence_bleu(const std::string& hyp, const std::vector<std::string>& refs,
                        const BleuOptions& opt) {
  std::vector<std::vector<std::string>> streams;
  for (const auto& r : refs) streams.push_back({r});
  return corpus_bleu({hyp}, streams, opt);
}

std::string BleuScore::verbose() const {
  std::string p;
  for (size_t n = 0; n < precisions.size(); ++n) p.append(n ? "/" : "").append(detail::fixed(precisions[n], 1));
  return p + " (BP = " + detail::fixed(bp, 3) + " ratio = " + detail::fixed(ratio, 3) +
         " hyp_len = " + std::to_string(hyp_len) + " ref_len = " + std::to_string(ref_len) + ")";
}

std::string BleuScore::format(int width) const {
  return "BLEU|" + signature + " = " + detail::fixed(score, width) + " " + verbose();
}

std::string BleuScore::json(int width) const {
  nlohmann::ordered_json j;
  j["name"] = "BLEU";
  j["score"] = std::stod(detail::fixed(score, width));
  j["signature"] = signature;
  j["verbose_score"] = verbose();
  detail::add_signature_fields(j, signature);
  j["precisions"] = precisions;
  j["counts"] = counts;
  j["totals"] = totals;
  j["bp"] = bp;
  j["ratio"] = ratio;
  j["hyp_len"] = hyp_len;
  j["ref_len"] = ref_len;
  j["score_exact"] = score;
  return j.dump(1);
}

}  // namespace qkv::eval
