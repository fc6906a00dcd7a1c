// The validation subsets of training runs (tasks/training_run.h: spread_index, keep_spread):
// valid.max_examples / max_sentences keep items floor(i * n / m), spread over a file that comes
// sorted, never its first m. The reference is the formula itself in 128-bit arithmetic.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "qkv/tasks/training_run.h"

using qkv::tasks::keep_spread;
using qkv::tasks::spread_index;

namespace {

size_t floor_formula(size_t i, size_t n, size_t m) {
  __extension__ typedef unsigned __int128 u128;  // i * n past 2^64 for the large cases
  return size_t(u128(i) * u128(n) / u128(m));
}

TEST(ValidationSubset, SpreadIndexIsTheFloorOfINOverMWithoutOverflow) {
  for (size_t n = 1; n <= 40; ++n)
    for (size_t m = 1; m <= n; ++m)
      for (size_t i = 0; i < m; ++i)
        ASSERT_EQ(spread_index(i, n, m), floor_formula(i, n, m)) << i << " " << n << " " << m;
  // i * n overflows 64 bits here; the split form does not.
  const size_t n = (size_t(1) << 40) + 12345, m = (size_t(1) << 31) - 1;
  for (size_t i : {size_t(0), size_t(1), m / 3, m / 2 + 7, m - 2, m - 1})
    EXPECT_EQ(spread_index(i, n, m), floor_formula(i, n, m)) << i;
  EXPECT_LT(spread_index(m - 1, n, m), n);
}

// A file sorted by label, as the sentiment corpora are written (all of one class, then the
// next): a subset keeps every label in its share, in file order; the first m would be one label.
TEST(ValidationSubset, KeepsEveryLabelOfALabelSortedFileInItsShare) {
  std::vector<std::string> items;
  for (const char* label : {"neg", "neu", "pos"})
    for (int k = 0; k < 100; ++k) items.push_back(std::string(label) + std::to_string(k));
  const std::vector<std::string> all = items;
  keep_spread(items, 30);
  ASSERT_EQ(items.size(), 30u);
  std::map<std::string, int> per_label;
  for (size_t i = 0; i < items.size(); ++i) {
    EXPECT_EQ(items[i], all[floor_formula(i, all.size(), 30)]);
    ++per_label[items[i].substr(0, 3)];
  }
  EXPECT_EQ(per_label, (std::map<std::string, int>{{"neg", 10}, {"neu", 10}, {"pos", 10}}));
  EXPECT_EQ(items.front(), "neg0");
  EXPECT_EQ(items.back(), "pos90");
}

TEST(ValidationSubset, ZeroOrAtLeastTheCountKeepsEverything) {
  const std::vector<int> all = {5, 3, 9, 1, 7};
  for (int64_t max : {int64_t(0), int64_t(5), int64_t(6), int64_t(1) << 40}) {
    std::vector<int> v = all;
    keep_spread(v, max);
    EXPECT_EQ(v, all) << max;
  }
  std::vector<int> one = all;
  keep_spread(one, 1);
  EXPECT_EQ(one, std::vector<int>{5});
  std::vector<int> none;
  keep_spread(none, 3);
  EXPECT_TRUE(none.empty());
}

}  // namespace
