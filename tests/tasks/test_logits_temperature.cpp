// Sampling at temperatures so small that logit / temperature leaves float's range: the result is
// greedy's token, as the limit T -> 0 is. logit 2.5 / 1e-38 was +inf, the sampler's exp(inf - inf)
// NaN, and every draw returned the last token of the vocabulary (`qkv generate --sample -t 1e-39`,
// /v1/completions with "temperature": 1e-38).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "qkv/decode/logits_process.h"

using namespace qkv;

TEST(LogitsProcess, TinyTemperaturesSampleTheLargestLogit) {
  for (double t : {1e-30, 1e-38, 1e-300}) {
    SCOPED_TRACE(t);
    decode::LogitsOptions o;
    o.temperature = t;
    for (const std::vector<float>& logits : {std::vector<float>{2.f, 1.f, 2.5f, -1.f, 0.f},
                                             std::vector<float>{-3.f, -2.9f, -40.f, -2.95f, -7.f}}) {
      std::vector<float> w = logits;
      decode::warp_logits(w.data(), int64_t(w.size()), o);
      const int64_t best = std::max_element(logits.begin(), logits.end()) - logits.begin();
      for (size_t v = 0; v < w.size(); ++v) EXPECT_FALSE(std::isnan(w[v])) << v;
      for (double u : {0.0, 0.3, 0.999999})
        EXPECT_EQ(decode::sample_token(w.data(), int64_t(w.size()), u), best) << u;
    }
  }
  // Where nothing leaves float's range the logits are divided as they always were.
  decode::LogitsOptions o;
  o.temperature = 0.7;
  std::vector<float> w = {2.f, 1.f, 2.5f, -1.f};
  decode::warp_logits(w.data(), 4, o);
  for (size_t v = 0; v < 4; ++v) EXPECT_EQ(w[v], float(double(std::vector<float>{2.f, 1.f, 2.5f, -1.f}[v]) / 0.7));
}

// The penalties past float's range: a bias of 1e39, a repetition penalty of 1e-300, a frequency or
// presence penalty of -1e39 made a logit +inf and the sampler drew the vocabulary's last token.
// They saturate at float's largest value, so the favoured token is drawn, as greedy chooses it.
TEST(LogitsProcess, PenaltiesPastFloatsRangeSampleTheFavouredToken) {
  const std::vector<float> logits = {2.f, 1.f, 2.5f, -1.f, 0.f};
  std::vector<decode::LogitsOptions> cases(4);
  cases[0].logit_bias = {{1, 1e39}};
  cases[1].repetition_penalty = 1e-300;  // token 1 (in the history) divided by it
  cases[2].frequency_penalty = -1e39;    // token 1 generated once
  cases[3].presence_penalty = -1e39;
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE(c);
    std::vector<float> w = logits;
    decode::apply_penalties(w.data(), 5, {3, 1}, 1, cases[c]);  // prompt {3}, generated {1}
    EXPECT_EQ(w[1], std::numeric_limits<float>::max());
    EXPECT_EQ(decode::argmax_token(w.data(), 5), 1);
    for (double u : {0.0, 0.5, 0.999999}) EXPECT_EQ(decode::sample_token(w.data(), 5, u), 1) << u;
  }
}

// +inf logits from the model itself: the limit of softmax, each of them equally likely by u.
TEST(LogitsProcess, InfiniteLogitsShareTheDraw) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> w = {0.f, inf, 3.f, inf, -inf};
  EXPECT_EQ(decode::sample_token(w.data(), 5, 0.0), 1);
  EXPECT_EQ(decode::sample_token(w.data(), 5, 0.49), 1);
  EXPECT_EQ(decode::sample_token(w.data(), 5, 0.5), 3);
  EXPECT_EQ(decode::sample_token(w.data(), 5, 0.999999), 3);
}
