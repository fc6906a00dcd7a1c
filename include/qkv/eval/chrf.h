// qkv/eval/chrf.h - chrF (Popovic 2015) and chrF++ (Popovic 2017) identical to sacreBLEU 2.x:
// character n-grams 1..char_order with whitespace removed, optional word n-grams 1..word_order,
// statistics summed over the corpus, F-beta of the order-averaged precision and recall.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace qkv::eval {

struct ChrfOptions {
  int char_order = 6;
  int word_order = 0;          // 2 = chrF++
  int beta = 2;
  bool lowercase = false;
  bool whitespace = false;     // keep whitespace inside character n-grams
  bool eps_smoothing = false;  // chrF++.py/NLTK style averaging of per-order F scores
  static ChrfOptions chrf_plus_plus() {
    ChrfOptions o;
    o.word_order = 2;
    return o;
  }
};

struct ChrfScore {
  double score = 0;            // 0..100
  std::vector<int64_t> stats;  // per order (chars first, then words): hyp, ref, match
  std::string name;            // "chrF2", "chrF2++"
  std::string nrefs;
  std::string signature;       // "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:..."
  std::string format(int width = 2) const;  // "chrF2|<signature> = 61.27"
  std::string json(int width = 2) const;
};

// Same reference layout and errors as corpus_bleu: refs[k][i] = k-th reference of segment i.
// With several references the one with the best sentence F score counts for each segment.
ChrfScore corpus_chrf(const std::vector<std::string>& hyps,
                      const std::vector<std::vector<std::string>>& refs,
                      const ChrfOptions& opt = {});
ChrfScore sentence_chrf(const std::string& hyp, const std::vector<std::string>& refs,
                        const ChrfOptions& opt = {});
// F score from statistics laid out as ChrfScore::stats.
double chrf_from_stats(const std::vector<int64_t>& stats, int beta, bool eps_smoothing);

}  // namespace qkv::eval
