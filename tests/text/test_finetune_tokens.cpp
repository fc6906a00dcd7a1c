// [START] / [DELIM] / [EXTRACT] added to GPT-2's byte-level BPE (text/finetune_tokens.h): new ids
// after the 50,257 of the vocabulary, matched in the text before pre-tokenization (never split,
// even inside a word), the fine-tuning template, and tokenizer.json keeping all of it.
// Expected ids are GPT-2's published encodings ("Hello" 15496, " world" 995, " Hello" 18435,
// "a" 64, "b" 65), as encoder.json holds them.
#include <gtest/gtest.h>

#include "qkv/text/bpe.h"
#include "qkv/text/finetune_tokens.h"
#include "qkv/text/tokenizer_json.h"
#include "qkv/util/error.h"
#include "text_fixtures.h"

using namespace qkv;
using namespace qkv::text;
using namespace qkv::testing;

namespace {

std::unique_ptr<BpeTokenizer> gpt2_with_finetune_tokens(const FinetuneTokenNames& names = {}) {
  const std::string d = npm_cache() + "/gpt2/";
  auto tok = BpeTokenizer::load_gpt2(d + "encoder.json", d + "vocab.bpe");
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(add_finetune_tokens(*tok, names), 3);
  return tok;
}

using Ids = std::vector<int32_t>;

}  // namespace

TEST(FinetuneTokens, NewIdsAfterTheVocabularyAndNeverSplit) {
  auto tok = gpt2_with_finetune_tokens();
  EXPECT_EQ(tok->vocab_size(), 50260);
  EXPECT_EQ(tok->require_special_id(Role::Start), 50257);
  EXPECT_EQ(tok->require_special_id(Role::Delim), 50258);
  EXPECT_EQ(tok->require_special_id(Role::Extract), 50259);
  // Without the tokens GPT-2 splits "[START]" into pieces; with them it is one id wherever it stands.
  EXPECT_EQ(tok->encode("[START]Hello world[DELIM] Hello[EXTRACT]"), (Ids{50257, 15496, 995, 50258, 18435, 50259}));
  EXPECT_EQ(tok->encode("a[START]b"), (Ids{64, 50257, 65}));
  EXPECT_EQ(tok->encode("[EXTRACT][EXTRACT]"), (Ids{50259, 50259}));
  EXPECT_EQ(tok->encode("[START"), (Ids{58, 2257, 7227}));  // "[", "ST", "ART": not the token
  // The template wraps single texts and pairs.
  EXPECT_EQ(tok->encode_single("Hello world").ids, (Ids{50257, 15496, 995, 50259}));
  EXPECT_EQ(tok->encode_pair("Hello world", " Hello").ids, (Ids{50257, 15496, 995, 50258, 18435, 50259}));
  EXPECT_EQ(tok->decode(Ids{50257, 15496, 50259}, /*skip_special=*/false), "[START]Hello[EXTRACT]");
  EXPECT_EQ(tok->decode(Ids{50257, 15496, 50259}), "Hello");
  // Adding them again changes nothing.
  EXPECT_EQ(add_finetune_tokens(*tok), 0);
  EXPECT_EQ(tok->vocab_size(), 50260);
}

TEST(FinetuneTokens, ConfigurableNamesAndTokenizerJsonRoundTrip) {
  FinetuneTokenNames names{"<|start|>", "<|delim|>", "<|extract|>"};
  auto tok = gpt2_with_finetune_tokens(names);
  const std::string path = scratch("finetune_tokenizer.json");
  tok->save(path);
  auto back = load_tokenizer(path);
  EXPECT_EQ(back->vocab_size(), 50260);
  EXPECT_EQ(back->require_special_id(Role::Start), 50257);
  EXPECT_EQ(back->require_special_id(Role::Delim), 50258);
  EXPECT_EQ(back->require_special_id(Role::Extract), 50259);
  EXPECT_EQ(back->encode("x<|start|>Hello world<|extract|>"), (Ids{87, 50257, 15496, 995, 50259}));
  EXPECT_EQ(back->encode_pair("Hello world", " Hello").ids, (Ids{50257, 15496, 995, 50258, 18435, 50259}));
  EXPECT_EQ(back->encode("[START]"), tok->encode("[START]"));  // the default names are plain text here
  EXPECT_NE(back->encode("[START]").size(), 1u);
  EXPECT_THROW(add_finetune_tokens(*back, {"[A]", "[A]", "[B]"}), Error);
}
