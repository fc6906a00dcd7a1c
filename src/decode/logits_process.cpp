// Generation's logit processing (see qkv/decode/logits_process.h). Probabilities and their sums
// are taken in double over the f32 logits; the processed logits stay f32 (as Hugging Face's).
#include "qkv/decode/logits_process.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "qkv/util/error.h"

namespace qkv::decode {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A processed logit back in float: a finite value past float's range saturates at its largest
// finite value rather than becoming inf (a bias of 1e39, or a logit divided by a repetition penalty
// of 1e-300, made +inf, and the sampler's exp(inf - inf) was NaN: it drew the vocabulary's last
// token). -inf (a ban) stays -inf.
float saturate(double x) {
  constexpr double kMax = std::numeric_limits<float>::max();
  return std::isfinite(x) ? float(std::clamp(x, -kMax, kMax)) : float(x);
}
}  // namespace

void LogitsOptions::validate() const {
  QKV_CHECK(temperature > 0 && std::isfinite(temperature), "generate", "temperature must be > 0, got ", temperature);
  QKV_CHECK(top_k >= 0, "generate", "top_k must be >= 0 (0 = off), got ", top_k);
  QKV_CHECK(top_p > 0 && top_p <= 1, "generate", "top_p must be in (0, 1], got ", top_p);
  QKV_CHECK(repetition_penalty > 0 && std::isfinite(repetition_penalty), "generate",
            "repetition_penalty must be > 0 (1 = off), got ", repetition_penalty);
  QKV_CHECK(std::isfinite(presence_penalty), "generate", "presence_penalty must be finite, got ", presence_penalty);
  QKV_CHECK(std::isfinite(frequency_penalty), "generate", "frequency_penalty must be finite, got ", frequency_penalty);
  for (size_t i = 0; i < logit_bias.size(); ++i) {
    const auto& [t, b] = logit_bias[i];
    QKV_CHECK(std::isfinite(b), "generate", "logit_bias of token ", t, " must be finite, got ", b);
    for (size_t j = 0; j < i; ++j)
      QKV_CHECK(logit_bias[j].first != t, "generate", "logit_bias names token ", t, " twice");
  }
}

void LogitsOptions::validate(int64_t vocab_size) const {
  validate();
  for (const auto& [t, b] : logit_bias)
    QKV_CHECK(t >= 0 && t < vocab_size, "generate", "logit_bias: token ", t, " outside the vocabulary [0, ",
              vocab_size, ")");
}

void apply_presence_frequency_penalty(float* logits, int64_t V, const int64_t* generated, size_t n, double presence,
                                      double frequency) {
  if (presence == 0 && frequency == 0) return;
  std::vector<int64_t> count(static_cast<size_t>(V), 0);
  for (size_t i = 0; i < n; ++i) {
    const int64_t t = generated[i];
    QKV_CHECK(t >= 0 && t < V, "presence/frequency penalty", "token ", t, " outside the vocabulary [0, ", V, ")");
    ++count[size_t(t)];
  }
  for (int64_t v = 0; v < V; ++v)
    if (const int64_t c = count[size_t(v)])
      logits[v] = saturate(double(logits[v]) - double(c) * frequency - presence);
}

void apply_repetition_penalty(float* logits, int64_t V, const std::vector<int64_t>& history, double penalty) {
  if (penalty == 1.0) return;
  std::vector<uint8_t> seen(static_cast<size_t>(V), 0);
  for (int64_t t : history) {
    QKV_CHECK(t >= 0 && t < V, "repetition penalty", "token ", t, " outside the vocabulary [0, ", V, ")");
    if (seen[size_t(t)]) continue;  // each token once, however often it occurred
    seen[size_t(t)] = 1;
    const float x = logits[t];
    logits[t] = saturate(x < 0 ? double(x) * penalty : double(x) / penalty);
  }
}

void apply_penalties(float* logits, int64_t V, const std::vector<int64_t>& history, size_t prompt_len,
                     const LogitsOptions& opt) {
  QKV_CHECK(prompt_len <= history.size(), "penalties", "a prompt of ", prompt_len, " tokens in a history of ",
            history.size());
  for (const auto& [t, b] : opt.logit_bias) {
    QKV_CHECK(t >= 0 && t < V, "logit bias", "token ", t, " outside the vocabulary [0, ", V, ")");
    logits[t] = saturate(double(logits[t]) + b);
  }
  apply_repetition_penalty(logits, V, history, opt.repetition_penalty);
  apply_presence_frequency_penalty(logits, V, history.data() + prompt_len, history.size() - prompt_len,
                                   opt.presence_penalty, opt.frequency_penalty);
}

void warp_logits(float* logits, int64_t V, const LogitsOptions& opt) {
  if (V <= 0) return;
  if (opt.temperature != 1.0) {
    // A tiny temperature took logits past float's range (logit 2 / 1e-38 = +inf): the sampler's
    // exp(inf - inf) was NaN and it returned the last token of the vocabulary every time. Then the
    // distances from the largest logit are scaled instead: the same distribution (softmax ignores a
    // shift), the largest at 0 and the rest at most 0, -inf where they underflow (greedy's limit).
    double mx = -INFINITY;
    bool overflows = false;
    for (int64_t v = 0; v < V; ++v)
      if (std::isfinite(logits[v])) {
        mx = std::max(mx, double(logits[v]));
        overflows |= std::abs(double(logits[v]) / opt.temperature) > double(std::numeric_limits<float>::max());
      }
    const double shift = overflows ? mx : 0.0;
    for (int64_t v = 0; v < V; ++v) logits[v] = float((double(logits[v]) - shift) / opt.temperature);
  }
  if (opt.top_k > 0 && opt.top_k < V) {  // keep logits >= the k-th largest
    std::vector<float> tmp(logits, logits + V);
    std::nth_element(tmp.begin(), tmp.begin() + (opt.top_k - 1), tmp.end(), std::greater<float>());
    const float kth = tmp[size_t(opt.top_k - 1)];
    for (int64_t v = 0; v < V; ++v)
      if (logits[v] < kth) logits[v] = kNegInf;
  }
  if (opt.top_p < 1.0) {
    // Most probable first (ties: lower id first); keep a token while the probability of the
    // tokens before it is still below p: the smallest prefix whose sum reaches p.
    std::vector<int64_t> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
    const double mx = logits[order[0]];
    if (mx == -INFINITY) return;
    double total = 0;
    for (int64_t v = 0; v < V; ++v) total += std::exp(double(logits[v]) - mx);
    double before = 0;
    for (int64_t i = 0; i < V; ++i) {
      const int64_t v = order[size_t(i)];
      if (before >= opt.top_p && i > 0) {
        logits[v] = kNegInf;
        continue;
      }
      before += std::exp(double(logits[v]) - mx) / total;
    }
  }
}

int64_t argmax_token(const float* logits, int64_t V) {
  int64_t best = 0;
  for (int64_t v = 1; v < V; ++v)
    if (logits[v] > logits[best]) best = v;
  return best;
}

int64_t sample_token(const float* logits, int64_t V, double u) {
  float mx = kNegInf;
  for (int64_t v = 0; v < V; ++v) mx = std::max(mx, logits[v]);
  if (mx == kNegInf) return 0;
  if (mx == -kNegInf) {  // +inf logits (a model's overflow): softmax's limit, each of them equally likely
    std::vector<int64_t> top;
    for (int64_t v = 0; v < V; ++v)
      if (logits[v] == mx) top.push_back(v);
    return top[std::min(top.size() - 1, size_t(u * double(top.size())))];
  }
  double total = 0;
  for (int64_t v = 0; v < V; ++v) total += std::exp(double(logits[v]) - double(mx));
  const double target = u * total;
  double acc = 0;
  int64_t last = 0;
  for (int64_t v = 0; v < V; ++v) {
    if (logits[v] == kNegInf) continue;
    acc += std::exp(double(logits[v]) - double(mx));
    last = v;
    if (target < acc) return v;
  }
  return last;  // u * total rounded above the sum: the last possible token
}

TokenLogprob token_logprob(const float* logits, int64_t V, int64_t token, int64_t top_n) {
  QKV_CHECK(token >= 0 && token < V, "logprobs", "token ", token, " outside the vocabulary [0, ", V, ")");
  const float mx = *std::max_element(logits, logits + V);
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(double(logits[v]) - double(mx));
  const double lse = double(mx) + std::log(sum);
  TokenLogprob r{token, double(logits[token]) - lse, {}};
  if (top_n <= 0) return r;  // no ranking: each generated token pays one pass over V, not a sort
  std::vector<int64_t> ids(static_cast<size_t>(V));
  std::iota(ids.begin(), ids.end(), int64_t(0));
  const int64_t n = std::min(top_n, V);
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(),
                    [&](int64_t a, int64_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  for (int64_t k = 0; k < n && logits[ids[size_t(k)]] != kNegInf; ++k)  // -inf: a suppressed id, not a token
    r.top.emplace_back(ids[size_t(k)], double(logits[ids[size_t(k)]]) - lse);
  return r;
}

}  // namespace qkv::decode
