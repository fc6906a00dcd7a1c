// No-repeat-n-gram blocking (decode::Options::no_repeat_ngram_size, as fairseq and CTranslate2):
// the ban list against a brute-force reading of the rule, and a table model that loops: with
// blocking, no output of greedy, beam or sampling repeats an n-gram, greedy takes the most probable
// allowed token at every step, and log-probabilities stay the model's own (not renormalised).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "qkv/decode/search.h"
#include "table_model.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

// True if some n-gram occurs twice in t (brute force over all pairs of positions).
bool has_repeated_ngram(const std::vector<int64_t>& t, int n) {
  for (size_t i = 0; i + size_t(n) <= t.size(); ++i)
    for (size_t j = i + 1; j + size_t(n) <= t.size(); ++j)
      if (std::equal(t.begin() + int64_t(i), t.begin() + int64_t(i + size_t(n)), t.begin() + int64_t(j))) return true;
  return false;
}

constexpr int64_t kV = 6, kPad = 0, kBos = 1, kEos = 2, kT = 24;

// W[prev][next]: 3 -> 4 -> 3 -> 4 ... is by far the likeliest path and </s> the least likely, so
// an unblocked decoder loops until the length limit.
TableModel looping_model() {
  std::vector<float> w(size_t(kV * kV), 0.f), p(size_t(kT * kV), 0.f), s(size_t(2 * kV), 0.f);
  auto W = [&](int64_t a, int64_t b) -> float& { return w[size_t(a * kV + b)]; };
  for (int64_t a = 0; a < kV; ++a) {
    W(a, kEos) = -4.f;
    W(a, kPad) = -6.f;  // never generated anyway
    W(a, 5) = 0.5f;
  }
  W(kBos, 3) = 3.f;
  W(3, 4) = 3.f;
  W(4, 3) = 3.f;
  W(4, 5) = 1.f;
  W(5, 3) = 2.f;
  for (int64_t i = 0; i < kT * kV; ++i) p[size_t(i)] = 0.01f * float(i % 7);
  s[size_t(kV + 4)] = 0.3f;  // sentence 1 leans a little towards 4
  return TableModel(Tensor::from_vector(w, {kV, kV}), Tensor::from_vector(p, {kT, kV}),
                    Tensor::from_vector(s, {2, kV}), kT + 1);
}

// log softmax of the table model's logits after `prefix` (at step prefix.size()) for sentence b.
std::vector<double> model_logprobs(TableModel& m, int64_t b, const std::vector<int64_t>& prefix) {
  Tensor src = Tensor::zeros({2, 1}, DType::i64), pad = Tensor::zeros({2, 1}, DType::u8);
  auto st = m.start(src, pad);
  st->select_rows({b});
  int64_t last = kBos;
  Tensor logits;
  for (size_t t = 0; t <= prefix.size(); ++t) {
    logits = m.step(*st, Tensor::from_vector(std::vector<int64_t>{last}, {1}));
    if (t < prefix.size()) last = prefix[t];
  }
  std::vector<double> x = logits.to_vector<double>(), lp(x.size());
  double mx = *std::max_element(x.begin(), x.end()), sum = 0;
  for (double v : x) sum += std::exp(v - mx);
  for (size_t v = 0; v < x.size(); ++v) lp[v] = x[v] - mx - std::log(sum);
  return lp;
}

}  // namespace

TEST(NoRepeatNgram, BansEqualBruteForce) {
  Generator gen(13);
  size_t nonempty = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int64_t> t(size_t(gen.randint(12)));
    for (auto& x : t) x = int64_t(gen.randint(4));
    for (int n = 1; n <= 4; ++n) {
      std::set<int64_t> want;  // v is banned iff appending it creates an n-gram that t already has
      for (int64_t v = 0; v < 4; ++v) {
        std::vector<int64_t> ext = t;
        ext.push_back(v);
        if (int64_t(ext.size()) >= n && has_repeated_ngram(ext, n) && !has_repeated_ngram(t, n)) want.insert(v);
      }
      if (has_repeated_ngram(t, n)) continue;  // only histories the decoder can produce
      std::vector<int64_t> got = decode::repeated_ngram_bans(t, n);
      EXPECT_EQ(std::set<int64_t>(got.begin(), got.end()), want) << "trial " << trial << " n " << n;
      EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
      nonempty += !got.empty();
    }
  }
  EXPECT_GT(nonempty, 100u);
}

TEST(NoRepeatNgram, GreedyBeamAndSamplingNeverRepeatAndGreedyTakesTheBestAllowedToken) {
  TableModel m = looping_model();
  Tensor src = Tensor::zeros({2, 1}, DType::i64), pad = Tensor::zeros({2, 1}, DType::u8);
  decode::Options o;
  o.max_len_ratio = 0;
  o.max_len_extra = kT;
  auto loops = decode::greedy(m, src, pad, {kBos, kEos, kPad}, o);
  EXPECT_TRUE(has_repeated_ngram(loops[0][0].tokens, 2)) << "the model should loop without blocking";
  EXPECT_EQ(int64_t(loops[0][0].tokens.size()), kT);
  for (int n : {1, 2, 3}) {
    SCOPED_TRACE("n " + std::to_string(n));
    o.no_repeat_ngram_size = n;
    o.beam = 1;
    o.sample = false;
    auto greedy = decode::greedy(m, src, pad, {kBos, kEos, kPad}, o);
    for (int64_t b = 0; b < 2; ++b) {
      const auto& h = greedy[size_t(b)][0];
      EXPECT_FALSE(has_repeated_ngram(h.tokens, n));
      // Replay: each token is the argmax of the model's log-probabilities among the allowed ones
      // (no repeated n-gram, not <pad> or <s>), and the hypothesis's log-probability sums the
      // model's (unrenormalised) values.
      double sum = 0;
      for (size_t t = 0; t < h.tokens.size(); ++t) {
        std::vector<int64_t> prefix(h.tokens.begin(), h.tokens.begin() + int64_t(t));
        std::vector<double> lp = model_logprobs(m, b, prefix);
        double best = -INFINITY;
        for (int64_t v = 0; v < kV; ++v) {
          std::vector<int64_t> ext = prefix;
          ext.push_back(v);
          if (v != kPad && v != kBos && !has_repeated_ngram(ext, n)) best = std::max(best, lp[size_t(v)]);
        }
        EXPECT_NEAR(lp[size_t(h.tokens[t])], best, 1e-6) << "step " << t;
        sum += lp[size_t(h.tokens[t])];
      }
      EXPECT_NEAR(h.logprob, sum, 1e-5 * (1 + std::abs(sum)));
    }
    o.beam = 3;
    o.nbest = 3;
    for (auto& sent : decode::beam_search(m, src, pad, {kBos, kEos, kPad}, o))
      for (auto& h : sent) EXPECT_FALSE(has_repeated_ngram(h.tokens, n));
    o.beam = o.nbest = 1;
    o.sample = true;
    for (uint64_t seed = 0; seed < 5; ++seed) {
      o.seed = seed;
      for (auto& sent : decode::greedy(m, src, pad, {kBos, kEos, kPad}, o)) EXPECT_FALSE(has_repeated_ngram(sent[0].tokens, n));
    }
  }
  o = decode::Options();
  o.no_repeat_ngram_size = -1;
  EXPECT_THROW(decode::greedy(m, src, pad, {kBos, kEos, kPad}, o), Error);
}

// A hypothesis longer than the tokens n-gram blocking leaves it (no </s>, 1-gram blocking, three
// words): the n-gram bans give way, <pad>, <s> and <unk> stay banned, so a word repeats. The
// fallback lifted every ban and greedy, beam and sampling emitted <pad> and <unk>.
TEST(NoRepeatNgram, WhenTheBansLeaveNothingTheSpecialsStayBanned) {
  constexpr int64_t V = 6, T = 8, kPadId = 0, kBosId = 1, kUnkId = 2;  // 3, 4, 5: words
  // The model prefers <pad>, then <s>, then <unk>, then the words.
  std::vector<float> s(static_cast<size_t>(V), 0.f);
  for (int64_t v = 0; v < V; ++v) s[size_t(v)] = 6.f - float(v);
  TableModel m(Tensor::zeros({V, V}), Tensor::zeros({T, V}), Tensor::from_vector(s, {1, V}), T);
  Tensor src = Tensor::zeros({1, 1}, DType::i64), pad = Tensor::zeros({1, 1}, DType::u8);
  decode::Options o;
  o.max_len_ratio = 0, o.max_len_extra = 6, o.no_repeat_ngram_size = 1;
  const decode::SpecialIds ids{kBosId, -1, kPadId, kUnkId};
  auto check = [&](const std::vector<std::vector<decode::Hypothesis>>& out, const char* what) {
    for (const auto& sent : out)
      for (const auto& h : sent) {
        EXPECT_EQ(h.tokens.size(), 6u) << what;
        for (int64_t t : h.tokens) EXPECT_GE(t, 3) << what << ": a special token";
      }
  };
  check(decode::translate(m, src, pad, ids, o), "greedy");
  o.beam = 3, o.nbest = 3;
  check(decode::translate(m, src, pad, ids, o), "beam");
  o.beam = o.nbest = 1, o.sample = true;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    o.seed = seed;
    check(decode::translate(m, src, pad, ids, o), "sampling");
  }
}
