// Extractive QA's span search (qkv/decode/span.h).
#include "qkv/decode/span.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "qkv/util/error.h"

namespace qkv::decode {

namespace {

// Indices of the k largest values (ties: the lower index first), all when k = 0 or k >= size.
std::vector<int64_t> top_indices(std::span<const float> v, int64_t k) {
  std::vector<int64_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), int64_t(0));
  if (k <= 0 || k >= int64_t(v.size())) return idx;
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t a, int64_t b) {
    return v[size_t(a)] > v[size_t(b)] || (v[size_t(a)] == v[size_t(b)] && a < b);
  });
  idx.resize(size_t(k));
  std::sort(idx.begin(), idx.end());
  return idx;
}

bool better(const SpanCandidate& a, const SpanCandidate& b) {
  if (a.score != b.score) return a.score > b.score;
  if (a.window != b.window) return a.window < b.window;
  if (a.start != b.start) return a.start < b.start;
  return a.end < b.end;
}

}  // namespace

std::vector<SpanCandidate> best_spans(const std::vector<SpanWindow>& windows, const SpanSearchOptions& opt) {
  QKV_CHECK(opt.max_answer_length >= 1, "span search", "max_answer_length must be >= 1, got ", opt.max_answer_length);
  QKV_CHECK(opt.n_best >= 1, "span search", "n_best must be >= 1, got ", opt.n_best);
  std::map<std::pair<int64_t, int64_t>, SpanCandidate> by_answer;  // (begin, stop) -> its best candidate
  // Held to a bound by keeping the n_best best answers whenever it grows past it: the map of every
  // span took ~19 kB a word of context (3 GB for 160k words). Exact: an answer dropped had n_best
  // better ones, whose scores can only rise; a better candidate of its own, later, brings it back.
  const size_t bound = std::max<size_t>(4096, 4 * size_t(opt.n_best));
  auto prune = [&] {
    std::vector<SpanCandidate> all;
    all.reserve(by_answer.size());
    for (auto& [k, c] : by_answer) all.push_back(c);
    std::nth_element(all.begin(), all.begin() + (opt.n_best - 1), all.end(), better);
    all.resize(size_t(opt.n_best));
    by_answer.clear();
    for (auto& c : all) by_answer.emplace(std::pair{c.begin, c.stop}, c);
  };
  auto offer = [&](const SpanCandidate& c) {
    auto [it, fresh] = by_answer.emplace(std::pair{c.begin, c.stop}, c);
    if (!fresh && better(c, it->second)) it->second = c;
    if (by_answer.size() > bound) prune();
  };
  for (size_t w = 0; w < windows.size(); ++w) {
    const SpanWindow& win = windows[w];
    const int64_t T = int64_t(win.start_logits.size());
    QKV_CHECK(int64_t(win.end_logits.size()) == T && int64_t(win.ctx_begin.size()) == T &&
                  int64_t(win.ctx_end.size()) == T,
              "span search", "window ", w, ": start/end logits and offsets must all have ", T, " positions");
    auto in_context = [&](int64_t t) { return win.ctx_begin[size_t(t)] >= 0; };
    auto candidate = [&](int64_t s, int64_t e) {
      return SpanCandidate{int64_t(w), s, e, win.ctx_begin[size_t(s)], win.ctx_end[size_t(e)],
                           double(win.start_logits[size_t(s)]) + double(win.end_logits[size_t(e)])};
    };
    if (opt.top_k <= 0) {
      for (int64_t s = 0; s < T; ++s) {
        if (!in_context(s)) continue;
        for (int64_t e = s; e < std::min(T, s + opt.max_answer_length); ++e)
          if (in_context(e)) offer(candidate(s, e));
      }
      continue;
    }
    const std::vector<int64_t> starts = top_indices(win.start_logits, opt.top_k), ends = top_indices(win.end_logits, opt.top_k);
    for (int64_t s : starts)
      for (int64_t e : ends)
        if (in_context(s) && in_context(e) && s <= e && e - s + 1 <= opt.max_answer_length) offer(candidate(s, e));
  }
  std::vector<SpanCandidate> out;
  out.reserve(by_answer.size());
  for (auto& [k, c] : by_answer) out.push_back(c);
  const size_t n = std::min(out.size(), size_t(opt.n_best));
  std::partial_sort(out.begin(), out.begin() + n, out.end(), better);
  out.resize(n);
  return out;
}

}  // namespace qkv::decode
