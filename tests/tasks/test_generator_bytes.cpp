// tasks::Generator with byte-level tokens, whose pieces need not be UTF-8: generated runs of lone
// lead and continuation bytes print U+FFFD as Hugging Face's decode (errors="replace") does, and
// the log-probabilities' tokens and text_offset (OpenAI's: code points into the choice's text,
// echoed prompt and special tokens included) list such tokens as their text shows them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "qkv/tasks/generator.h"
#include "qkv/text/bpe.h"
#include "qkv/text/pretokenize.h"
#include "qkv/util/utf8.h"
#include "gpt_refs.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

// Byte c's symbol in a byte-level BPE vocabulary (GPT-2's bytes_to_unicode).
std::string byte_symbol(int c) { return text::bytes_to_unicode_string(std::string(1, char(c))); }

// The 256 byte symbols: id b is byte b.
std::vector<std::string> byte_vocab() {
  std::vector<std::string> vocab;
  for (int c = 0; c < 256; ++c) vocab.push_back(byte_symbol(c));
  return vocab;
}

}  // namespace

// Byte-level tokens decode to bytes, and a free run over a vocabulary of lone UTF-8 lead and
// continuation bytes strings them into invalid sequences: the text and the streamed pieces carry
// U+FFFD where Hugging Face's decode (errors="replace") would, and the pieces still add up to it.
TEST(Generator, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  RefFile ref("gpt_generate");
  io::GptBundle b = load_ref_gpt(ref, "gen_gpt2");
  // Every byte's symbol (a byte-level vocabulary needs them all), ordered so that the model's 97
  // ids are the continuation bytes 0x80-0xBF and the lead bytes 0xC2-0xE2.
  std::vector<int> bytes;
  for (int c = 0x80; c <= 0xBF; ++c) bytes.push_back(c);
  for (int c = 0xC2; c <= 0xE2; ++c) bytes.push_back(c);
  for (int c = 0; c < 256; ++c)
    if (c < 0x80 || c > 0xE2 || (c > 0xBF && c < 0xC2)) bytes.push_back(c);
  std::vector<std::string> vocab;
  for (int c : bytes) vocab.push_back(byte_symbol(c));
  b.tokenizer =
      std::make_shared<text::BpeTokenizer>(vocab, std::vector<text::BpeTokenizer::Merge>{}, text::BpeOptions{});
  tasks::Generator g(b);
  tasks::GenerateOptions o;
  o.sample = true;
  o.eos_id = -1;
  o.max_new_tokens = 48;
  o.logits = {1.5, 0, 1.0, 1.0};  // hot sampling over every token
  o.seed = 7;
  o.batch_size = 1;
  std::string streamed;
  o.on_token = [&](const tasks::TokenEvent& ev) { streamed += ev.text; };
  const tasks::Generation r = g.generate_ids({prompts_of(ref, "gen_gpt2")[1]}, o)[0];
  ASSERT_GE(r.tokens.size(), 16u);  // up to the context
  const std::vector<int32_t> ids(r.tokens.begin(), r.tokens.end());
  const std::string raw = b.tokenizer->decode(ids);
  ASSERT_FALSE(utf8::is_valid(raw)) << "the run should contain ill-formed bytes";
  EXPECT_EQ(r.text, utf8::replace_invalid(raw));
  EXPECT_EQ(streamed, r.text);
}

// OpenAI's text_offset: each listed token's start in the choice's text, in code points. With echo
// the text is "ab" + "\xC3\xA9xy\xF0\x9F\x98\x80z": e-acute is one token of 2 bytes and 1 code
// point, "xy" one of 2, the emoji's 4 bytes 4 tokens (each U+FFFD alone, all at the emoji), and
// eos (a special: no text) where the text ends. Streamed parts carry the whole's offsets.
TEST(Generator, LogprobsTextOffsetsAreCodePointsIntoTheText) {
  std::vector<std::string> vocab = byte_vocab();  // 256 = e-acute, 257 = "xy"
  vocab.push_back(vocab[0xC3] + vocab[0xA9]);
  vocab.push_back("xy");
  text::BpeTokenizer tok(vocab, {{vocab[0xC3], vocab[0xA9]}, {"x", "y"}}, text::BpeOptions{});
  tok.add_special_token("<|endoftext|>");
  const std::vector<int32_t> eos = tok.encode("<|endoftext|>");
  ASSERT_EQ(eos.size(), 1u);
  tasks::Generation g;
  g.prompt_ids = {int64_t('a'), int64_t('b')};
  auto lp = [](int64_t id, double v) { return decode::TokenLogprob{id, v, {{id, v}}}; };
  g.prompt_logprobs = {lp('b', -0.5)};
  g.tokens = {256, 257, 0xF0, 0x9F, 0x98, 0x80, int64_t('z'), eos[0]};
  for (int64_t id : g.tokens) g.logprobs.push_back(lp(id, -1.0 - double(id) / 1000));
  const nlohmann::json all = tasks::logprobs_json(tok, g, true);
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  EXPECT_EQ(all["tokens"], nlohmann::json({"a", "b", "\xC3\xA9", "xy", r, r, r, r, "z", "<|endoftext|>"}));
  EXPECT_EQ(all["text_offset"], nlohmann::json({0, 1, 2, 3, 5, 5, 5, 5, 6, 7}));
  EXPECT_EQ(tasks::logprobs_json(tok, g, false)["text_offset"], nlohmann::json({0, 1, 3, 3, 3, 3, 4, 5}));
  // Each whole token is where the offset says in the echoed text.
  const std::u32string text = utf8::to_u32_dropping_invalid("ab\xC3\xA9xy\xF0\x9F\x98\x80z");
  for (size_t j : {0, 1, 2, 3, 8}) {
    const std::u32string t = utf8::to_u32_dropping_invalid(all["tokens"][j].get<std::string>());
    EXPECT_EQ(text.substr(all["text_offset"][j].get<size_t>(), t.size()), t) << j;
  }
  // Streamed: the prompt, then generated tokens [0, 3), then the rest.
  const nlohmann::json parts[3] = {tasks::logprobs_json(tok, g, true, 0, 0),
                                   tasks::logprobs_json(tok, g, true, 0, 3, /*list_prompt=*/false),
                                   tasks::logprobs_json(tok, g, true, 3, SIZE_MAX, /*list_prompt=*/false)};
  nlohmann::json joined = nlohmann::json::object();
  for (const auto& part : parts)
    for (const auto& [key, values] : part.items())
      for (const auto& v : values) joined[key].push_back(v);
  EXPECT_EQ(joined, all);
}

// A prompt written with a special token in it ("a<|endoftext|>b"), echoed: the choice's text
// holds the special's text, so the offsets count it (OpenAI's text_offset indexes that text).
TEST(Generator, EchoedPromptOffsetsCountTheTextOfItsSpecialTokens) {
  text::BpeTokenizer tok(byte_vocab(), {}, text::BpeOptions{});
  tok.add_special_token("<|endoftext|>");
  const std::string prompt = "a<|endoftext|>bc";
  tasks::Generation g;
  for (int32_t id : tok.encode(prompt)) g.prompt_ids.push_back(id);
  ASSERT_EQ(g.prompt_ids.size(), 4u);
  auto lp = [](int64_t id, double v) { return decode::TokenLogprob{id, v, {{id, v}}}; };
  for (size_t i = 1; i < g.prompt_ids.size(); ++i) g.prompt_logprobs.push_back(lp(g.prompt_ids[i], -0.5));
  g.tokens = {int64_t('x'), int64_t('y')};
  for (int64_t id : g.tokens) g.logprobs.push_back(lp(id, -1.0));
  const nlohmann::json all = tasks::logprobs_json(tok, g, true);
  EXPECT_EQ(all["tokens"], nlohmann::json({"a", "<|endoftext|>", "b", "c", "x", "y"}));
  EXPECT_EQ(all["text_offset"], nlohmann::json({0, 1, 14, 15, 16, 17}));
  const std::string text = prompt + "xy";  // what the server answers with echo
  for (size_t j = 0; j < all["tokens"].size(); ++j) {
    const std::string t = all["tokens"][j].get<std::string>();
    EXPECT_EQ(text.substr(all["text_offset"][j].get<size_t>(), t.size()), t) << j;
  }
  EXPECT_EQ(tasks::logprobs_json(tok, g, false)["text_offset"], nlohmann::json({0, 1}));
}

// Candidates whose texts are the same (bytes that are not UTF-8 alone all print as U+FFFD) are
// listed once, with the most likely one's logprob: here the chosen token's own.
TEST(Generator, TopLogprobsKeepTheMostLikelyOfTokensWithTheSameText) {
  text::BpeTokenizer tok(byte_vocab(), {}, text::BpeOptions{});
  tasks::Generation g;
  g.prompt_ids = {int64_t('a')};
  g.tokens = {0xC3};
  g.logprobs = {decode::TokenLogprob{0xC3, -0.25, {{0xC3, -0.25}, {0xA9, -1.5}, {int64_t('z'), -2.0}, {0xF0, -3.0}}}};
  const nlohmann::json top = tasks::logprobs_json(tok, g, false)["top_logprobs"][0];
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  EXPECT_EQ(top, nlohmann::json({{r, -0.25}, {"z", -2.0}}));
}
