// length_sorted_batches (train/batch_order.h): the batch plan of the classification, tagging and
// QA streams. Batches run in length order and cover every example once; equal lengths come in a
// seeded order, so a file sorted by label does not give batches of one label.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "qkv/train/batch_order.h"
#include "qkv/train/cls_stream.h"

using namespace qkv;
using namespace qkv::train;

namespace {

// 400 examples of lengths 5..8 (100 each, interleaved), the first 200 labelled 0 and the rest 1:
// a corpus file sorted by label, as the sentiment corpus is.
std::vector<size_t> lengths() {
  std::vector<size_t> l(400);
  for (size_t i = 0; i < l.size(); ++i) l[i] = 5 + i % 4;
  return l;
}
int label(size_t i) { return i < 200 ? 0 : 1; }

TEST(LengthPlan, CoversEveryExampleOnceInLengthOrder) {
  const std::vector<size_t> l = lengths();
  const auto plan = length_sorted_batches(l, 32, 7);
  std::vector<size_t> seen;
  size_t last = 0;
  for (size_t b = 0; b < plan.size(); ++b) {
    EXPECT_EQ(plan[b].size(), b + 1 < plan.size() ? 32u : l.size() - 32 * (plan.size() - 1));
    for (size_t i : plan[b]) {
      EXPECT_GE(l[i], last) << "batch " << b;
      last = l[i];
      seen.push_back(i);
    }
  }
  std::sort(seen.begin(), seen.end());
  ASSERT_EQ(seen.size(), l.size());
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i);
}

TEST(LengthPlan, BatchesOfALabelSortedFileMixTheLabels) {
  const auto plan = length_sorted_batches(lengths(), 32, 7);
  // Each length has 50 examples of each label; in file order a batch of 32 would hold one label
  // (or two at a boundary). Shuffled, every full batch holds both, and none is 90% one label.
  for (size_t b = 0; b + 1 < plan.size(); ++b) {
    int ones = 0;
    for (size_t i : plan[b]) ones += label(i);
    EXPECT_GT(ones, 3) << "batch " << b;
    EXPECT_LT(ones, 29) << "batch " << b;
  }
}

TEST(LengthPlan, TheSeedDecidesTheOrderOfEqualLengths) {
  const std::vector<size_t> l = lengths();
  EXPECT_EQ(length_sorted_batches(l, 32, 7), length_sorted_batches(l, 32, 7));
  EXPECT_NE(length_sorted_batches(l, 32, 7), length_sorted_batches(l, 32, 8));
}

TEST(LengthPlan, ClassificationStreamBatchesMixTheLabels) {
  std::vector<ClsExample> ex(400);
  for (size_t i = 0; i < ex.size(); ++i) {
    ex[i].ids.assign(lengths()[i], 5);
    ex[i].types.assign(ex[i].ids.size(), 0);
    ex[i].label = label(i);
  }
  const ClsExampleStream stream(ex, 32, 1);
  const std::vector<ClsBatch> batches = stream.all_batches();
  ASSERT_EQ(batches.size(), 13u);
  for (size_t b = 0; b < batches.size(); ++b) {
    const int64_t* y = batches[b].labels.data<int64_t>();
    const int64_t n = batches[b].labels.numel();
    const int64_t ones = std::count(y, y + n, int64_t(1));
    EXPECT_TRUE(ones > 0 && ones < n) << "batch " << b << " holds one label (" << ones << " of " << n << ")";
  }
}

}  // namespace
