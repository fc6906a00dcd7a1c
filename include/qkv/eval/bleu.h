// qkv/eval/bleu.h - corpus BLEU identical to sacreBLEU 2.x (Post, 2018): tokenizer 13a
// (mteval-v13a.pl), clipped n-gram counts over all references, brevity penalty against the
// closest reference length, smoothing 'exp' by default (sacreBLEU's default; see docs/metrics.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace qkv::eval {

enum class BleuSmooth { None, Floor, AddK, Exp };

struct BleuOptions {
  bool lowercase = false;            // Python str.lower() before tokenizing
  std::string tokenize = "13a";      // "13a" or "none" (whitespace split only)
  BleuSmooth smooth = BleuSmooth::Exp;
  double smooth_value = -1;          // < 0: method default (floor 0.1, add-k 1)
  int max_order = 4;
  bool effective_order = false;      // true for sentence-level BLEU (sacreBLEU sentence_bleu)
};

struct BleuScore {
  double score = 0;                  // 0..100
  std::vector<double> precisions;    // per order, 0..100 (after smoothing)
  std::vector<double> counts;        // matched n-grams per order (add-k adds k for n > 1)
  std::vector<double> totals;        // hypothesis n-grams per order (add-k adds k for n > 1)
  double bp = 0, ratio = 0;          // brevity penalty; hyp_len / ref_len
  int64_t hyp_len = 0, ref_len = 0;  // corpus token counts (ref_len: sum of closest lengths)
  std::string nrefs;                 // "1", "2", ... or "var"
  std::string signature;             // "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:..."
  // sacreBLEU's line: "BLEU|<signature> = 48.53 82.4/50.0/32.1/21.2 (BP = 1.000 ratio = ...)"
  std::string format(int width = 2) const;
  std::string verbose() const;       // the part after the score
  std::string json(int width = 2) const;  // sacreBLEU's --format json plus the statistics
};

// mteval-v13a tokenization of one line (UTF-8 in and out).
std::string tokenize_13a(const std::string& line);

// hyps[i] is segment i; refs[k][i] is the k-th reference of segment i (one vector per reference
// file). Empty reference lines are skipped for that segment (sacreBLEU); a segment whose
// references are all empty, differing line counts or invalid UTF-8 throw qkv::Error.
BleuScore corpus_bleu(const std::vector<std::string>& hyps,
                      const std::vector<std::vector<std::string>>& refs,
                      const BleuOptions& opt = {});

// One segment against its references; sacreBLEU's sentence_bleu defaults (effective order on).
BleuOptions sentence_bleu_options();
BleuScore sentence_bleu(const std::string& hyp, const std::vector<std::string>& refs,
                        const BleuOptions& opt = sentence_bleu_options());

// BLEU from summed sufficient statistics (sacreBLEU BLEU.compute_bleu).
BleuScore compute_bleu(std::vector<int64_t> correct, std::vector<int64_t> total, int64_t hyp_len,
                       int64_t ref_len, const BleuOptions& opt = {});

// The sacreBLEU version whose behaviour qkv reproduces (shown in signatures as "version:...").
extern const char* const kSacreBleuCompat;

}  // namespace qkv::eval
