// Seq2SeqStream: token budget, coverage, seeded epoch order, exact resume.
#include "qkv/train/seq2seq_stream.h"

#include <gtest/gtest.h>

#include <set>

#include "qkv/text/batching.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::train;

namespace {
std::vector<Example> corpus(int n) {
  std::vector<Example> ex;
  uint64_t s = 3;
  for (int i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    int ls = 1 + int((s >> 33) % 20), lt = 1 + int((s >> 45) % 25);
    Example e;
    for (int j = 0; j < ls; ++j) e.src.push_back(3 + (i + j) % 50);
    e.src.push_back(2);
    e.tgt.push_back(1000 + i);  // a unique first token identifies the example
    for (int j = 1; j < lt; ++j) e.tgt.push_back(3 + j % 50);
    e.tgt.push_back(2);
    ex.push_back(e);
  }
  return ex;
}
const SeqIds kIds{0, 1, 2};
}  // namespace

TEST(Seq2SeqStream, BudgetCoverageAndShiftedTargets) {
  Seq2SeqStream st(corpus(300), kIds, 200, 64, 7);
  std::multiset<int64_t> seen;
  for (int64_t b = 0; b < st.batches_per_epoch(); ++b) {
    Seq2SeqBatch batch = st.next();
    int64_t B = batch.src.size(0), S = batch.src.size(1), T = batch.tgt_in.size(1);
    EXPECT_LE(B * std::max(S, T), 200);
    const int64_t *tin = batch.tgt_in.data<int64_t>(), *tout = batch.tgt_out.data<int64_t>();
    for (int64_t r = 0; r < B; ++r) {
      EXPECT_EQ(tin[r * T], kIds.bos);  // decoder input starts with <s>
      seen.insert(tout[r * T]);
      for (int64_t t = 1; t < T; ++t)
        if (tout[r * T + t] != kIds.pad) {  // shifted right (</s> never fed)
          EXPECT_EQ(tin[r * T + t], tout[r * T + t - 1]);
        }
    }
  }
  EXPECT_EQ(st.epoch(), 0);
  EXPECT_EQ(seen.size(), 300u);
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 300u);  // each example exactly once
}

TEST(Seq2SeqStream, EpochsReshuffleAndResumeIsExact) {
  Seq2SeqStream a(corpus(200), kIds, 150, 64, 11);
  int64_t nb = a.batches_per_epoch();
  std::vector<int64_t> first_epoch, second_epoch;
  for (int64_t i = 0; i < nb; ++i) first_epoch.push_back(a.next().tgt_out.data<int64_t>()[0]);
  for (int64_t i = 0; i < 5; ++i) second_epoch.push_back(a.next().tgt_out.data<int64_t>()[0]);
  EXPECT_EQ(a.epoch(), 1);
  EXPECT_NE(std::vector<int64_t>(first_epoch.begin(), first_epoch.begin() + 5), second_epoch);
  auto pos = a.position();
  Seq2SeqStream b(corpus(200), kIds, 150, 64, 11);
  b.restore(pos);
  for (int i = 0; i < nb + 3; ++i) {
    Seq2SeqBatch x = a.next(), y = b.next();
    ASSERT_TRUE(qkv::testing::bit_equal(x.src, y.src)) << "batch " << i;
    ASSERT_TRUE(qkv::testing::bit_equal(x.tgt_out, y.tgt_out)) << "batch " << i;
  }
  Seq2SeqStream other_seed(corpus(200), kIds, 150, 64, 12);
  EXPECT_THROW(other_seed.restore(pos), Error);
  // Same seed and batch count, different batches: one token changed (as a retrained tokenizer
  // would), or the examples reordered (as a changed corpus file would).
  std::vector<Example> edited = corpus(200);
  edited[17].src[0] += 1;
  Seq2SeqStream other_tokens(edited, kIds, 150, 64, 11);
  ASSERT_EQ(other_tokens.batches_per_epoch(), nb);
  EXPECT_THROW(other_tokens.restore(pos), Error);
  std::vector<Example> reordered = corpus(200);
  std::swap(reordered[3], reordered[150]);
  Seq2SeqStream other_order(reordered, kIds, 150, 64, 11);
  ASSERT_EQ(other_order.batches_per_epoch(), nb);
  EXPECT_THROW(other_order.restore(pos), Error);
  // A position saved before the fingerprint existed cannot be verified: refused.
  auto old_pos = pos;
  old_pos.erase("plan");
  EXPECT_THROW(b.restore(old_pos), Error);
}

// The stream is the text batcher's algorithm: batch e of epoch k holds exactly the examples of
// token_budget_batches(...)[epoch_batch_order(..., k)[e]], rows in that order.
TEST(Seq2SeqStream, BatchesAreTheTextBatchersInItsEpochOrder) {
  std::vector<Example> ex = corpus(120);
  std::vector<int64_t> ls, lt;
  for (const Example& e : ex) ls.push_back(int64_t(e.src.size())), lt.push_back(int64_t(e.tgt.size()));
  text::BatcherOptions opt;
  opt.max_tokens = 20;  // below the longest pairs (up to 26 tokens): some are left out
  opt.max_batch = 4;
  size_t skipped = 0;
  auto expected = text::token_budget_batches(ls, lt, opt, &skipped);
  Seq2SeqStream st(ex, kIds, 20, 4, 11);
  EXPECT_GT(st.skipped(), 0u);
  EXPECT_EQ(st.skipped(), skipped);
  ASSERT_EQ(st.batches_per_epoch(), int64_t(expected.size()));
  for (uint64_t epoch = 0; epoch < 2; ++epoch) {
    auto order = text::epoch_batch_order(expected.size(), 11, epoch);
    for (uint32_t b : order) {
      Seq2SeqBatch batch = st.next();
      const auto& members = expected[b];
      ASSERT_EQ(batch.tgt_out.size(0), int64_t(members.size()));
      for (size_t r = 0; r < members.size(); ++r)
        EXPECT_EQ(batch.tgt_out.data<int64_t>()[int64_t(r) * batch.tgt_out.size(1)], 1000 + members[r]);
    }
  }
}

TEST(Seq2SeqStream, EmptyCorpusIsAnError) {
  EXPECT_THROW(Seq2SeqStream({}, kIds, 100, 10, 1), Error);
  EXPECT_THROW(Seq2SeqStream(corpus(10), kIds, 1, 10, 1), Error);  // every pair longer than max_tokens
}
