// BERT pretraining data (train/bert_pretrain.h): the masking proportions over many sequences
// hold within a binomial bound computed here, special tokens are never chosen, and NSP pairs
// have the [CLS] A [SEP] B [SEP] shape, half of them random.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>

#include "qkv/train/bert_pretrain.h"

using namespace qkv::train;

namespace {

BertSpecials specials(int64_t vocab) {
  BertSpecials sp;
  sp.pad = 0, sp.cls = 2, sp.sep = 3, sp.mask = 4, sp.vocab = vocab;
  sp.is_special.assign(size_t(vocab), 0);
  for (int i = 0; i < 5; ++i) sp.is_special[size_t(i)] = 1;  // [PAD] [UNK] [CLS] [SEP] [MASK]
  return sp;
}

// |k - n p| <= z sqrt(n p (1 - p)): a binomial count within z standard deviations.
void expect_binomial(int64_t k, int64_t n, double p, const char* what) {
  const double z = 5.0;  // P(|Z| > 5) ~ 6e-7 per check: a failure means a wrong rate, not bad luck
  const double mean = double(n) * p, sd = std::sqrt(double(n) * p * (1 - p));
  EXPECT_LE(std::abs(double(k) - mean), z * sd) << what << ": " << k << " of " << n << ", expected " << mean << " +- "
                                                << z << " * " << sd;
}

}  // namespace

TEST(BertMasking, ProportionsWithinBinomialBoundAndSpecialsNeverChosen) {
  const BertSpecials sp = specials(1000);
  MaskRng rng(12345);
  int64_t candidates = 0, chosen = 0, masked = 0, randomised = 0, kept = 0;
  for (int seq = 0; seq < 20000; ++seq) {
    // [CLS] a [SEP] b [SEP] [PAD]...: 10 + 10 real tokens, specials and padding among them.
    std::vector<int64_t> ids{sp.cls};
    for (int i = 0; i < 10; ++i) ids.push_back(5 + int64_t(rng.below(995)));
    ids.push_back(sp.sep);
    for (int i = 0; i < 10; ++i) ids.push_back(5 + int64_t(rng.below(995)));
    ids.push_back(sp.sep);
    for (int i = 0; i < 6; ++i) ids.push_back(sp.pad);
    const std::vector<int64_t> original = ids;
    std::vector<int64_t> labels;
    std::vector<MaskAction> act;
    mask_sequence(ids, labels, sp, rng, {}, &act);
    for (size_t i = 0; i < ids.size(); ++i) {
      const bool special = sp.is_special[size_t(original[i])];
      if (special) {
        ASSERT_EQ(act[i], MaskAction::none) << "special token chosen at " << i;
        ASSERT_EQ(ids[i], original[i]);
        ASSERT_EQ(labels[i], -100);
        continue;
      }
      ++candidates;
      if (act[i] == MaskAction::none) {
        ASSERT_EQ(labels[i], -100);
        ASSERT_EQ(ids[i], original[i]);
        continue;
      }
      ++chosen;
      ASSERT_EQ(labels[i], original[i]);
      switch (act[i]) {
        case MaskAction::mask: ++masked; ASSERT_EQ(ids[i], sp.mask); break;
        case MaskAction::random:
          ++randomised;
          ASSERT_FALSE(sp.is_special[size_t(ids[i])]) << "random replacement drew a special token";
          break;
        case MaskAction::keep: ++kept; ASSERT_EQ(ids[i], original[i]); break;
        default: FAIL();
      }
    }
  }
  ASSERT_EQ(candidates, 20000 * 20);
  expect_binomial(chosen, candidates, 0.15, "chosen");
  expect_binomial(masked, chosen, 0.8, "[MASK]");
  expect_binomial(randomised, chosen, 0.1, "random");
  expect_binomial(kept, chosen, 0.1, "unchanged");
}

TEST(BertMasking, TheBoundCanFail) {  // the check rejects a 14% rate over the same sample size
  const int64_t n = 400000;
  EXPECT_NONFATAL_FAILURE(expect_binomial(int64_t(0.14 * n), n, 0.15, "chosen"), "chosen");
}

TEST(BertNspPairs, ShapeSegmentsAndHalfRandom) {
  const BertSpecials sp = specials(1000);
  std::vector<std::vector<std::vector<int64_t>>> docs;
  MaskRng g(7);
  for (int d = 0; d < 4000; ++d) {
    std::vector<std::vector<int64_t>> doc;
    for (int s = 0, n = 2 + int(g.below(6)); s < n; ++s) doc.push_back(std::vector<int64_t>(3 + g.below(8), 10 + d));
    docs.push_back(doc);
  }
  MaskRng rng(1);
  const int64_t max_len = 24;
  auto pairs = make_nsp_pairs(docs, max_len, rng, sp);
  ASSERT_GT(pairs.size(), 400u);
  int64_t random = 0;
  for (const auto& p : pairs) {
    ASSERT_LE(int64_t(p.ids.size()), max_len);
    ASSERT_EQ(p.ids.front(), sp.cls);
    ASSERT_EQ(p.ids.back(), sp.sep);
    ASSERT_EQ(p.ids.size(), p.segments.size());
    // exactly one [SEP] inside, where the segment id switches from 0 to 1
    size_t sep = 0;
    for (size_t i = 1; i + 1 < p.ids.size(); ++i)
      if (p.ids[i] == sp.sep) sep = i;
    ASSERT_GT(sep, 1u);
    ASSERT_LT(sep + 2, p.ids.size());
    for (size_t i = 0; i < p.ids.size(); ++i) ASSERT_EQ(p.segments[i], i <= sep ? 0 : 1);
    // every document's tokens are one value: B from this document iff the pair is not random
    ASSERT_EQ(p.ids[1] == p.ids[sep + 1], p.is_random == 0);
    random += p.is_random;
  }
  // Each pair's B is random on a fair coin of its own.
  expect_binomial(random, int64_t(pairs.size()), 0.5, "random B");
}

// Documents of one sentence each (as many package descriptions are): half the pairs still keep a
// B that follows A, cut from the same sentence at a token boundary, A then B in order.
TEST(BertNspPairs, SingleSegmentDocumentsStayBalanced) {
  const BertSpecials sp = specials(100000);
  std::vector<std::vector<std::vector<int64_t>>> docs;
  MaskRng g(3);
  for (int d = 0; d < 4000; ++d) {
    std::vector<int64_t> seg;
    for (int k = 0, n = 2 + int(g.below(12)); k < n; ++k) seg.push_back(10 + 20 * d + k);  // consecutive ids
    docs.push_back({seg});
  }
  MaskRng rng(5);
  const auto pairs = make_nsp_pairs(docs, 32, rng, sp);  // every segment fits: no trimming
  ASSERT_GE(pairs.size(), 4000u);
  int64_t random = 0;
  for (const auto& p : pairs) {
    size_t sep = 0;
    for (size_t i = 1; i + 1 < p.ids.size(); ++i)
      if (p.ids[i] == sp.sep) sep = i;
    ASSERT_GT(sep, 1u);
    const bool same_doc = (p.ids[1] - 10) / 20 == (p.ids[sep + 1] - 10) / 20;
    ASSERT_EQ(same_doc, p.is_random == 0);
    if (p.is_random == 0) {  // A B is the whole sentence, in order
      std::vector<int64_t> ab(p.ids.begin() + 1, p.ids.begin() + std::ptrdiff_t(sep));
      ab.insert(ab.end(), p.ids.begin() + std::ptrdiff_t(sep) + 1, p.ids.end() - 1);
      ASSERT_EQ((ab.front() - 10) % 20, 0);
      for (size_t i = 1; i < ab.size(); ++i) ASSERT_EQ(ab[i], ab[i - 1] + 1);
      ASSERT_EQ(ab.size(), docs[size_t((ab.front() - 10) / 20)][0].size());
    }
    random += p.is_random;
  }
  expect_binomial(random, int64_t(pairs.size()), 0.5, "random B");
}

// truncate_pair against create_pretraining_data.py's truncate_seq_pair as published: one token at
// a time off the longer side (b on a tie), `del trunc_tokens[0]` on a coin flip below 0.5, else
// `pop()`. The same draws give the same sides, for sides up to ~100 times the budget.
TEST(BertNspPairs, TruncatePairIsTheReferenceTokenAtATime) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    MaskRng sizes(seed);
    std::vector<int64_t> a(sizes.below(400)), b(sizes.below(400));
    for (size_t i = 0; i < a.size(); ++i) a[i] = int64_t(i);
    for (size_t i = 0; i < b.size(); ++i) b[i] = 1000 + int64_t(i);
    const size_t max_tokens = 1 + size_t(sizes.below(40));
    std::vector<int64_t> ref_a = a, ref_b = b;
    MaskRng r1(seed * 7), r2(seed * 7);
    while (ref_a.size() + ref_b.size() > max_tokens) {
      std::vector<int64_t>& t = ref_a.size() > ref_b.size() ? ref_a : ref_b;
      if (r1.uniform() < 0.5) t.erase(t.begin());
      else t.pop_back();
    }
    truncate_pair(a, b, max_tokens, r2);
    EXPECT_EQ(a, ref_a) << seed;
    EXPECT_EQ(b, ref_b) << seed;
    EXPECT_EQ(r1.bits(), r2.bits()) << seed << ": a different number of draws";
  }
}
