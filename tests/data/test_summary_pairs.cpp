// The pairing of pairs-debian (data/corpus_pairs.h) on hand-made packages: one positive per
// package; each negative's description comes from the same section and split, another source and
// another text; a package without a usable partner gets no negative; the seed decides the partner
// and nothing else.
#include <gtest/gtest.h>

#include <set>

#include "qkv/data/corpus_pairs.h"

using namespace qkv::data;

TEST(SummaryPairs, NegativesShareSectionAndSplitButNotSourceOrText) {
  std::vector<PackageText> p = {
      {"utils", "a", "A tool", "does a"},     {"utils", "a", "A tool (doc)", "does a"},
      {"utils", "b", "B tool", "does b"},     {"utils", "c", "C tool", "does c"},
      {"utils", "d", "D tool", "does b"},     {"net", "e", "E server", "serves e"},
      {"net", "f", "F server", "serves f"},   {"net", "g", "G server", "serves g"},
      {"games", "h", "H game", "plays h"},  // alone in its section: no negative
  };
  std::vector<int> split = {0, 0, 0, 0, 0, 0, 0, 1, 0};  // g is alone in (net, valid)
  std::set<size_t> partners_of_a;
  for (uint64_t seed : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u}) {
    auto pairs = make_summary_pairs(p, split, seed);
    std::set<size_t> positives, negatives;
    for (auto& q : pairs) {
      if (q.match) {
        EXPECT_EQ(q.summary_of, q.description_of);
        positives.insert(q.summary_of);
        continue;
      }
      const auto &s = p[q.summary_of], &d = p[q.description_of];
      EXPECT_EQ(s.section, d.section);
      EXPECT_EQ(split[q.summary_of], split[q.description_of]);
      EXPECT_NE(s.source, d.source);
      EXPECT_NE(s.description, d.description);
      EXPECT_TRUE(negatives.insert(q.summary_of).second) << "one negative per package";
      if (q.summary_of == 0) partners_of_a.insert(q.description_of);
    }
    EXPECT_EQ(positives.size(), p.size());
    // g is alone in (net, valid) and h in games: no negative for them.
    EXPECT_EQ(negatives, (std::set<size_t>{0, 1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(pairs.size(), p.size() + 7);
  }
  // a's partner is b, c or d (never a's doc package: same source), chosen by the seed.
  EXPECT_GT(partners_of_a.size(), 1u);
  for (size_t j : partners_of_a) EXPECT_TRUE(j == 2 || j == 3 || j == 4) << j;
}
