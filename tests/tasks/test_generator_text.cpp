// tasks::Generator's completion text for tokenizers that join words: cut the way Hugging Face's
// text-generation pipeline cuts it (TextGenerationPipeline.postprocess: decode prompt + completion,
// drop the first len(decode(prompt)) characters). So a word-level tokenizer's joining space leads
// the completion, and a WordPiece "##" piece or punctuation joins the prompt's last word with none:
// echoing prompt + completion gives the text the tokens decode to together. Greedy, sampled (also
// streamed, the pieces concatenating to the text), beam search, and the text_offset of each token.
#include <gtest/gtest.h>

#include "qkv/tasks/generator.h"
#include "qkv/text/wordpiece.h"
#include "tiny_models.h"

using namespace qkv;

namespace {

// Hugging Face's cut: decode(prompt + generated) after decode(prompt)'s length.
std::string hf_completion(const text::Tokenizer& tok, const tasks::Generation& g) {
  std::vector<int32_t> all(g.prompt_ids.begin(), g.prompt_ids.end());
  const std::string prompt = tok.decode(all);
  all.insert(all.end(), g.tokens.begin(), g.tokens.end());
  const std::string text = tok.decode(all);
  EXPECT_EQ(text.compare(0, prompt.size(), prompt), 0) << text;
  return text.substr(prompt.size());
}

// Every way of generating: greedy, n seeded samples (streamed too), beam search's best 2; for each
// completion, what it begins with (its first byte).
std::string check_every_mode(const io::GptBundle& b, const std::vector<std::string>& prompts) {
  tasks::Generator gen(b);
  const text::Tokenizer& tok = *b.tokenizer;
  std::string firsts;
  auto check = [&](const std::vector<tasks::Generation>& r, const char* mode) {
    for (const auto& g : r) {
      EXPECT_EQ(g.text, hf_completion(tok, g)) << mode;
      if (!g.text.empty()) firsts += g.text[0];
    }
  };
  tasks::GenerateOptions o;
  o.max_new_tokens = 5, o.eos_id = -1;
  check(gen.generate(prompts, o), "greedy");
  o.sample = true, o.logits.temperature = 2.0, o.num_return_sequences = 16, o.seed = 3;
  std::vector<std::string> streamed(prompts.size() * 16);
  o.on_token = [&](const tasks::TokenEvent& e) { streamed[e.prompt] += e.text; };
  const auto sampled = gen.generate(prompts, o);
  check(sampled, "sampled");
  for (size_t i = 0; i < sampled.size(); ++i) EXPECT_EQ(streamed[i], sampled[i].text) << i;
  o.sample = false, o.on_token = nullptr, o.num_beams = 2, o.num_return_sequences = 2;
  check(gen.generate(prompts, o), "beam");
  // text_offset: each generated token where its text is, after the joining space if any.
  o = {}, o.max_new_tokens = 5, o.eos_id = -1, o.logprobs = 0;
  for (const auto& g : gen.generate(prompts, o)) {
    const nlohmann::json lp = tasks::logprobs_json(tok, g, false);
    for (size_t j = 0; j < g.tokens.size(); ++j) {
      std::string t = lp["tokens"][j];
      if (t.rfind("##", 0) == 0) t.erase(0, 2);
      EXPECT_EQ(g.text.substr(lp["text_offset"][j].get<size_t>(), t.size()), t) << j << " in " << g.text;
    }
  }
  return firsts;
}

}  // namespace

TEST(GeneratorText, WordLevelCompletionsLeadWithTheJoiningSpace) {
  const io::GptBundle b = qkv_test::tiny_gpt(32, 32);
  const std::string firsts = check_every_mode(b, {"the file", "user name error"});
  EXPECT_EQ(firsts, std::string(firsts.size(), ' ')) << "every completion starts a new word";
}

TEST(GeneratorText, WordPieceContinuationsAndPunctuationJoinThePromptsLastWord) {
  io::GptBundle b;
  b.tokenizer = std::make_shared<text::WordPieceTokenizer>(
      std::vector<std::string>{"[UNK]", "the", "play", "file", "##ing", "##s", "##ed", ".", ",", "##er"},
      text::WordPieceOptions{});
  b.config.vocab_size = b.tokenizer->vocab_size();
  b.config.n_positions = 16, b.config.n_embd = 32, b.config.n_layer = 2, b.config.n_head = 4;
  default_generator().manual_seed(7);
  b.model = std::make_shared<models::Gpt>(b.config);
  const std::string firsts = check_every_mode(b, {"the play", "file"});
  // The random model's samples begin with both kinds of token: some with a space, some without.
  EXPECT_NE(firsts.find(' '), std::string::npos) << firsts;
  EXPECT_NE(firsts.find_first_not_of(' '), std::string::npos) << firsts;
}

// A model whose vocabulary is padded past its tokenizer's: a prompt ending in a padding id (no
// text to continue) gives the completion decoded alone.
TEST(GeneratorText, APromptEndingInAnIdPastTheTokenizerDecodesTheCompletionAlone) {
  io::GptBundle b = qkv_test::tiny_gpt(32, 32);
  const int64_t V = b.tokenizer->vocab_size();
  b.config.vocab_size = V + 3;
  default_generator().manual_seed(9);
  b.model = std::make_shared<models::Gpt>(b.config);
  tasks::Generator gen(b);
  tasks::GenerateOptions o;
  o.max_new_tokens = 4, o.eos_id = -1;
  for (int64_t id = V; id < V + 3; ++id) o.logits.logit_bias.push_back({id, -100.0});  // never generated
  const std::optional<int32_t> file = b.tokenizer->token_to_id("file");
  ASSERT_TRUE(file.has_value());
  const auto r = gen.generate_ids({{*file, V + 1}}, o);
  std::vector<int32_t> ids(r[0].tokens.begin(), r[0].tokens.end());
  EXPECT_EQ(r[0].text, b.tokenizer->decode(ids));
}
