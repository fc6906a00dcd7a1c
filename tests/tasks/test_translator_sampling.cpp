// Sampled translations (decode::Options::sample, `qkv translate --sample --seed`): sentence i of the
// input draws from random stream i of the seed, as qkv generate's prompts do, so its sample is the
// same at any batch size and whatever the other sentences are. One generator for the batch drew
// in row order after the length sort: the rest of the input and --batch-size changed it, and with
// batch size 1 every sentence drew the same numbers.
#include <gtest/gtest.h>

#include "qkv/tasks/translator.h"
#include "tiny_models.h"

using namespace qkv;

TEST(TranslatorSampling, EachSentenceDrawsFromTheStreamOfItsIndex) {
  tasks::Translator t(qkv_test::tiny_translation_model(31));
  std::vector<std::vector<int64_t>> src;  // lengths differ, so the length sort reorders them
  for (int64_t i = 0; i < 12; ++i) {
    src.emplace_back();
    for (int64_t k = 0; k < 2 + (i * 7) % 5; ++k) src.back().push_back(4 + (i * 5 + k * 3) % 13);
    src.back().push_back(3);  // </s>
  }
  tasks::TranslateOptions opt;
  opt.search.sample = true;
  opt.search.seed = 7;
  opt.search.max_len_extra = 12;
  auto tokens = [&](int64_t batch, const std::vector<std::vector<int64_t>>& s) {
    opt.batch_size = batch;
    std::vector<std::vector<int64_t>> out;
    for (const auto& h : t.translate_ids(s, opt)) out.push_back(h.front().tokens);
    return out;
  };
  const auto all = tokens(12, src);
  for (int64_t batch : {1, 3, 5}) EXPECT_EQ(tokens(batch, src), all) << "batch size " << batch;

  // Other sentences in the other places: each sentence keeps its sample.
  std::vector<std::vector<int64_t>> other = src;
  for (size_t i = 0; i < other.size(); i += 2) other[i] = {5, 6, 7, 8, 9, 10, 3};
  const auto mixed = tokens(4, other);
  for (size_t i = 1; i < src.size(); i += 2) EXPECT_EQ(mixed[i], all[i]) << "sentence " << i;

  // The streams differ: the same sentence in every place does not give one sample twelve times.
  const auto same = tokens(12, std::vector<std::vector<int64_t>>(12, src[3]));
  int distinct = 0;
  for (size_t i = 1; i < same.size(); ++i) distinct += same[i] != same[0];
  EXPECT_GT(distinct, 0);
  EXPECT_EQ(same[3], all[3]);
}
