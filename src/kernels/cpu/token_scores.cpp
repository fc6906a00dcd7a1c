#include "qkv/kernels/token_scores.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "qkv/kernels/softmax.h"
#include "row_max.h"

namespace qkv::kernels {
namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
}  // namespace

float row_logsumexp(const float* row, int64_t V, float* max_out) {
  const float mx = row_max(row, V);
  if (max_out) *max_out = mx;
  if (mx == kNegInf) return kNegInf;
  // f32 exps (vexp): blocks of 256 summed in f32 vector lanes (16 terms per lane),
  // block sums accumulated in double.
  constexpr int64_t kBlock = 256;
  double s = 0;
  int64_t v = 0;
  for (; v + kBlock <= V; v += kBlock) {
    const float* x = row + v;
    float bs = 0.f;
#pragma omp simd reduction(+ : bs)
    for (int64_t i = 0; i < kBlock; ++i) bs += vexp(x[i] - mx);
    s += double(bs);
  }
  for (; v < V; ++v) s += double(vexp(row[v] - mx));
  return mx + float(std::log(s));
}

void best_token(const float* row, int64_t V, int64_t& tok, double& lp, const std::vector<int64_t>* banned) {
  float mx;
  const float lse = row_logsumexp(row, V, &mx);
  // max_v (row[v] - lse) is mx - lse (rounding is monotone); its first position, found in one
  // vectorised pass (an earlier, smaller logit can round to the same value).
  const float best = mx - lse;
  int64_t first = V;
#pragma omp simd reduction(min : first)
  for (int64_t v = 0; v < V; ++v) first = (row[v] - lse == best && v < first) ? v : first;
  tok = first < V && best > kNegInf ? first : 0;  // no finite logit: 0 (as max_element over -inf)
  // The first maximum is also the first allowed maximum unless it is banned itself; only then
  // does the scalar walk run (decoding bans <pad> and <s>, which a trained model rarely prefers).
  if (banned && std::binary_search(banned->begin(), banned->end(), tok)) {
    float top = kNegInf;
    int64_t pick = -1;
    for (int64_t v = 0; v < V; ++v)
      if (row[v] - lse > top && !std::binary_search(banned->begin(), banned->end(), v)) top = row[v] - lse, pick = v;
    if (pick >= 0) tok = pick;  // else every finite token is banned: choose as if nothing were
  }
  lp = row[tok] - lse;
}

// One pass: a chunk of 16 logits is skipped unless its maximum beats the current m-th best, so
// after the first chunks almost every logit costs one vectorised compare.
void top_tokens(const float* row, int64_t V, size_t m, std::vector<std::pair<float, int64_t>>& top,
                const std::vector<int64_t>* banned) {
  top.clear();
  if (m == 0) return;
  const float lse = row_logsumexp(row, V);
  const bool bans = banned && !banned->empty();
  auto offer = [&](int64_t v) {
    const float l = row[v] - lse;
    if (top.size() == m && !(l > top.back().first)) return;
    if (bans && std::binary_search(banned->begin(), banned->end(), v)) return;
    auto at = std::upper_bound(top.begin(), top.end(), l,
                               [](float x, const std::pair<float, int64_t>& e) { return x > e.first; });
    top.insert(at, {l, v});  // after equal values: they have lower token ids
    if (top.size() > m) top.pop_back();
  };
  constexpr int64_t kChunk = 16;
  int64_t v = 0;
  for (; v + kChunk <= V; v += kChunk) {
    if (top.size() == m) {
      const float mx = row_max(row + v, kChunk);
      if (!(mx - lse > top.back().first)) continue;
    }
    for (int64_t i = 0; i < kChunk; ++i) offer(v + i);
  }
  for (; v < V; ++v) offer(v);
  if (top.empty() && bans) top_tokens(row, V, m, top, nullptr);  // every token banned: as if none were
}

}  // namespace qkv::kernels
