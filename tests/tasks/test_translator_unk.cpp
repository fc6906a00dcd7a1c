// The Translator passes over its target tokenizer's <unk> unless TranslateOptions' search allows
// it (decode::Options::allow_unk, `qkv translate --allow-unk`): on a small random model whose
// greedy outputs contain <unk> when allowed, each output without the ban equals the banned one up
// to its first <unk>, where the banned search takes another token, and no banned output has one.
#include <gtest/gtest.h>

#include <algorithm>

#include "qkv/tasks/translator.h"
#include "tiny_models.h"

using namespace qkv;

TEST(TranslatorUnk, SearchPassesOverTheTargetTokenizersUnkUnlessAllowed) {
  tasks::Translator t(qkv_test::tiny_translation_model(31));
  const int64_t unk = t.bundle().tgt_tok->require_special_id(text::Role::Unk);
  std::vector<std::vector<int64_t>> src;
  for (int64_t i = 0; i < 24; ++i) src.push_back({4 + i % 13, 4 + (i * 5) % 13, 4 + (i * 7 + 3) % 13, 3});
  tasks::TranslateOptions opt;
  const auto banned = t.translate_ids(src, opt);
  opt.search.allow_unk = true;
  const auto allowed = t.translate_ids(src, opt);
  int with_unk = 0;
  for (size_t i = 0; i < src.size(); ++i) {
    const auto &b = banned[i][0].tokens, &a = allowed[i][0].tokens;
    EXPECT_EQ(std::count(b.begin(), b.end(), unk), 0) << "sentence " << i;
    const auto first = std::find(a.begin(), a.end(), unk);
    if (first == a.end()) {
      EXPECT_EQ(b, a) << "sentence " << i;
      continue;
    }
    ++with_unk;
    const size_t at = size_t(first - a.begin());
    ASSERT_GT(b.size(), at) << "sentence " << i;
    EXPECT_TRUE(std::equal(a.begin(), first, b.begin())) << "sentence " << i;
    EXPECT_NE(b[at], unk) << "sentence " << i;
  }
  EXPECT_GE(with_unk, 3) << "the random model should choose <unk> in some outputs when allowed";
}
