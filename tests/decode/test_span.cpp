// Span search (decode/span.h) against a brute-force search over every (window, start, end) on
// random logits: the same n best, in the same order; Hugging Face's top-k heuristic equals it when
// k covers every position, and its best equals the true best whenever that best's start and end
// are among the top k.
#include "qkv/decode/span.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "qkv/util/error.h"

using namespace qkv;
using namespace qkv::decode;

namespace {

struct Win {
  std::vector<float> s, e;
  std::vector<int64_t> b, x;  // context bytes per position, -1 outside
  SpanWindow view() const { return {s, e, b, x}; }
};

// Windows over one context of 4 bytes per token: [CLS] q.. [SEP] ctx.. [SEP] pad.., overlapping
// by `overlap` context tokens; logits normal, some repeated to make ties.
std::vector<Win> random_windows(std::mt19937& g, int n_windows, int T, int q, int overlap) {
  std::normal_distribution<float> nd(0, 2);
  std::vector<Win> ws(static_cast<size_t>(n_windows));
  int doc = 0;
  for (auto& w : ws) {
    const int ctx = T - q - 3 - int(g() % 4);  // some padding at the end
    for (int t = 0; t < T; ++t) {
      w.s.push_back(g() % 7 == 0 ? 1.0f : nd(g));
      w.e.push_back(g() % 7 == 0 ? 1.0f : nd(g));
      const int c = t - (q + 2);
      const bool in = c >= 0 && c < ctx;
      w.b.push_back(in ? 4 * (doc + c) : -1);
      w.x.push_back(in ? 4 * (doc + c) + 3 : -1);
    }
    doc += ctx - overlap;
  }
  return ws;
}

// Every valid pair, best per answer bytes, sorted by (score desc, window, start, end).
std::vector<SpanCandidate> brute_force(const std::vector<Win>& ws, int64_t max_len, size_t n) {
  std::vector<SpanCandidate> all;
  for (size_t w = 0; w < ws.size(); ++w)
    for (int64_t s = 0; s < int64_t(ws[w].s.size()); ++s)
      for (int64_t e = 0; e < int64_t(ws[w].s.size()); ++e)
        if (ws[w].b[size_t(s)] >= 0 && ws[w].b[size_t(e)] >= 0 && s <= e && e - s + 1 <= max_len)
          all.push_back({int64_t(w), s, e, ws[w].b[size_t(s)], ws[w].x[size_t(e)],
                         double(ws[w].s[size_t(s)]) + double(ws[w].e[size_t(e)])});
  std::sort(all.begin(), all.end(), [](const SpanCandidate& a, const SpanCandidate& b) {
    return std::tie(b.score, a.window, a.start, a.end) < std::tie(a.score, b.window, b.start, b.end);
  });
  std::vector<SpanCandidate> out;
  std::map<std::pair<int64_t, int64_t>, bool> seen;
  for (auto& c : all)
    if (!seen[{c.begin, c.stop}] && out.size() < n) seen[{c.begin, c.stop}] = true, out.push_back(c);
  return out;
}

void expect_same(const std::vector<SpanCandidate>& a, const std::vector<SpanCandidate>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(a[i].window, b[i].window);
    EXPECT_EQ(a[i].start, b[i].start);
    EXPECT_EQ(a[i].end, b[i].end);
    EXPECT_EQ(a[i].begin, b[i].begin);
    EXPECT_EQ(a[i].stop, b[i].stop);
    EXPECT_EQ(a[i].score, b[i].score);
  }
}

std::vector<SpanWindow> views(const std::vector<Win>& ws) {
  std::vector<SpanWindow> v;
  for (auto& w : ws) v.push_back(w.view());
  return v;
}

}  // namespace

TEST(SpanSearch, EqualsBruteForceOnRandomLogits) {
  std::mt19937 g(15);
  for (int trial = 0; trial < 200; ++trial) {
    SCOPED_TRACE(trial);
    const int T = 13 + int(g() % 30), q = 1 + int(g() % 5), nw = 1 + int(g() % 3);
    auto ws = random_windows(g, nw, T, q, int(g() % 3));
    SpanSearchOptions o;
    o.max_answer_length = 1 + int64_t(g() % 10);
    o.n_best = 1 + int64_t(g() % 20);
    expect_same(best_spans(views(ws), o), brute_force(ws, o.max_answer_length, size_t(o.n_best)));
    o.top_k = T;  // every position: the heuristic is exact
    expect_same(best_spans(views(ws), o), brute_force(ws, o.max_answer_length, size_t(o.n_best)));
    // top-k: its best is the true best whenever the true best's positions are all in the top k
    o.top_k = 5, o.n_best = 1;
    const auto truth = brute_force(ws, o.max_answer_length, 1);
    ASSERT_EQ(truth.size(), 1u);
    const auto& w = ws[size_t(truth[0].window)];
    auto rank = [](const std::vector<float>& v, int64_t i) {
      int64_t r = 0;
      for (int64_t j = 0; j < int64_t(v.size()); ++j) r += v[size_t(j)] > v[size_t(i)] || (v[size_t(j)] == v[size_t(i)] && j < i);
      return r;
    };
    if (rank(w.s, truth[0].start) < 5 && rank(w.e, truth[0].end) < 5) expect_same(best_spans(views(ws), o), truth);
  }
}

TEST(SpanSearch, NeverTheQuestionSpecialsOrPaddingAndRespectsLength) {
  // [CLS] q [SEP] c0 c1 c2 [SEP] pad: the largest logits sit outside the context
  Win w;
  w.s = {9, 8, 9, 1, 0, 0, 9, 9};
  w.e = {9, 8, 9, 0, 0, 2, 9, 9};
  w.b = {-1, -1, -1, 0, 5, 10, -1, -1};
  w.x = {-1, -1, -1, 4, 9, 14, -1, -1};
  SpanSearchOptions o;
  o.n_best = 10;
  auto best = best_spans({w.view()}, o);
  ASSERT_EQ(best.size(), 6u);  // (3,3) (3,4) (3,5) (4,4) (4,5) (5,5)
  EXPECT_EQ(best[0].start, 3);
  EXPECT_EQ(best[0].end, 5);
  EXPECT_EQ(best[0].begin, 0);
  EXPECT_EQ(best[0].stop, 14);
  EXPECT_DOUBLE_EQ(best[0].score, 3.0);
  o.max_answer_length = 2;  // (3,5) is 3 tokens long
  best = best_spans({w.view()}, o);
  ASSERT_EQ(best.size(), 5u);
  EXPECT_EQ(best[0].start, 4);
  EXPECT_EQ(best[0].end, 5);
  o.top_k = 3;  // HF's heuristic: the top 3 starts/ends are all outside the context
  EXPECT_TRUE(best_spans({w.view()}, o).empty());
  o.n_best = 0;
  EXPECT_THROW(best_spans({w.view()}, o), Error);
}

// A long context: far more candidate spans than the search keeps at once (it prunes to the n best
// answers past 4,096), and overlapping windows offering the same answers again: still exactly the
// brute force's n best.
TEST(SpanSearch, ALongContextGivesTheBruteForcesAnswersWithBoundedMemory) {
  std::mt19937 g(7);
  for (int trial = 0; trial < 3; ++trial) {
    SCOPED_TRACE(trial);
    auto ws = random_windows(g, 40, 160, 4, 60);  // ~150 context tokens a window, 60 shared with the next
    SpanSearchOptions o;
    o.max_answer_length = 30;  // ~4,000 candidates a window, 160,000 in all
    o.n_best = trial == 0 ? 1 : 20;
    expect_same(best_spans(views(ws), o), brute_force(ws, o.max_answer_length, size_t(o.n_best)));
  }
}
