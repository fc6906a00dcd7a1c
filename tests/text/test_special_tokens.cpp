// Special tokens and add-special-tokens templates with segment ids.
#include <gtest/gtest.h>

#include <tuple>

#include "qkv/text/char_word.h"
#include "qkv/text/special_tokens.h"
#include "qkv/text/tokenizer.h"
#include "qkv/util/error.h"

using namespace qkv::text;

namespace {
std::unique_ptr<VocabTokenizer> words(const SpecialTokens& s) {
  VocabBuildOptions o;
  o.special_tokens = s.distinct();
  o.unk_token = s.tokens.at(Role::Unk);
  // counts: a 3, b 2, c 1 -> ids after the specials in that order
  return VocabTokenizer::build_from_text(VocabTokenizer::Level::Word, "a a a b b c", o);
}
using V = std::vector<int32_t>;
}  // namespace

TEST(SpecialTokens, BertSingleAndPairWithSegmentIds) {
  auto tok = words(SpecialTokens::bert());  // [PAD]0 [UNK]1 [CLS]2 [SEP]3 [MASK]4 a5 b6 c7
  tok->set_template(PostTemplate::bert());
  EXPECT_EQ(tok->require_special_id(Role::Cls), 2);
  EXPECT_EQ(tok->require_special_id(Role::Mask), 4);
  Encoding e = tok->encode_single("a b");
  EXPECT_EQ(e.ids, (V{2, 5, 6, 3}));
  EXPECT_EQ(e.type_ids, (V{0, 0, 0, 0}));
  EXPECT_EQ(e.special_mask, (std::vector<uint8_t>{1, 0, 0, 1}));
  Encoding p = tok->encode_pair("a b", "c zzz");
  EXPECT_EQ(p.ids, (V{2, 5, 6, 3, 7, 1, 3}));
  EXPECT_EQ(p.type_ids, (V{0, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(tok->encode_pair("a", "b", false).ids, (V{5, 6}));
  EXPECT_EQ(tok->encode_pair("a", "b", false).type_ids, (V{0, 1}));
  EXPECT_EQ(tok->decode(p.ids), "a b c");
  EXPECT_EQ(tok->decode(p.ids, false), "[CLS] a b [SEP] c [UNK] [SEP]");
  EXPECT_EQ(tok->decode(V{2, 5, 3}), "a");
  EXPECT_EQ(tok->decode(V{2, 5, 3}, false), "[CLS] a [SEP]");
}

TEST(SpecialTokens, GptFinetuneTemplate) {
  auto tok = words(SpecialTokens::gpt_finetune());  // [PAD]0 [UNK]1 [START]2 [DELIM]3 [EXTRACT]4
  tok->set_template(PostTemplate::gpt_finetune());
  Encoding p = tok->encode_pair("a", "b c");
  EXPECT_EQ(p.ids, (V{2, 5, 3, 6, 7, 4}));
  EXPECT_EQ(p.type_ids, (V{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(tok->encode_single("c").ids, (V{2, 7, 4}));
}

TEST(SpecialTokens, Seq2SeqBosEosAndRoberta) {
  auto tok = words(SpecialTokens::seq2seq());  // <pad>0 <unk>1 <s>2 </s>3 a4 b5 c6
  tok->set_template(PostTemplate::bos_eos());
  EXPECT_EQ(tok->encode_single("a c").ids, (V{2, 4, 6, 3}));
  tok->set_template(PostTemplate::roberta());
  Encoding p = tok->encode_pair("a", "b");
  EXPECT_EQ(p.ids, (V{2, 4, 3, 3, 5, 3}));
  EXPECT_EQ(p.type_ids, (V{0, 0, 0, 0, 0, 0}));
}

TEST(SpecialTokens, TemplateTokenOutsideVocabularyGetsNextId) {
  auto tok = words(SpecialTokens::seq2seq());  // 7 tokens
  tok->set_template(PostTemplate::bert());     // [CLS] [SEP] are new
  EXPECT_EQ(tok->token_to_id("[CLS]"), 7);
  EXPECT_EQ(tok->token_to_id("[SEP]"), 8);
  EXPECT_EQ(tok->vocab_size(), 9);
  EXPECT_EQ(tok->encode("a [SEP] b"), (V{4, 8, 5}));  // specials in text are split out
  EXPECT_EQ(tok->id_to_token(8), "[SEP]");
}

TEST(SpecialTokens, ParseSyntaxAndErrors) {
  PostTemplate t = PostTemplate::parse("[CLS] $A [SEP]", "[CLS] $A [SEP] $B:1 [SEP]");
  ASSERT_EQ(t.pair.size(), 5u);
  EXPECT_EQ(t.pair[4].type_id, 1);  // special inherits the type of the sequence before it
  EXPECT_EQ(t.pair[2].type_id, 0);
  EXPECT_EQ(t.to_string(true), "[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1");
  EXPECT_THROW(PostTemplate::parse("$A $B", ""), qkv::Error);
  EXPECT_THROW(role_from_name("boss"), qkv::Error);
  auto tok = words(SpecialTokens::seq2seq());
  EXPECT_THROW(tok->require_special_id(Role::Cls), qkv::Error);
  EXPECT_THROW(tok->decode(V{99}), qkv::Error);
}

TEST(Truncation, LongestFirstCutsTheLongerSequenceAndATieCutsB) {
  // transformers' truncation="longest_first": one token at a time from the longer sequence.
  auto run = [](size_t na, size_t nb, int64_t budget) {
    std::vector<int32_t> a(na, 1), b(nb, 2);
    bool cut = qkv::text::truncate_longest_first(a, b, budget);
    return std::tuple{a.size(), b.size(), cut};
  };
  EXPECT_EQ(run(5, 3, 6), std::tuple(size_t(3), size_t(3), true));   // (5,3) -> (4,3) -> (3,3)
  EXPECT_EQ(run(3, 3, 5), std::tuple(size_t(3), size_t(2), true));   // a tie cuts b
  EXPECT_EQ(run(3, 3, 4), std::tuple(size_t(2), size_t(2), true));   // (3,2) -> (2,2)
  EXPECT_EQ(run(2, 9, 6), std::tuple(size_t(2), size_t(4), true));   // only b is longer
  EXPECT_EQ(run(4, 0, 2), std::tuple(size_t(2), size_t(0), true));   // one text
  EXPECT_EQ(run(4, 2, 6), std::tuple(size_t(4), size_t(2), false));  // fits: untouched
}
