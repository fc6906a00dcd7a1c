// tasks::Generator on a model whose vocabulary is padded past its tokenizer's (docs/config.md
// allows vocab_size above the tokenizer's): the padding ids have no text, so they are never
// chosen, listed among the top log-probabilities or kept by beam search; an eos id among them
// still ends a completion. The padding logits are pushed far above the rest, so that any way of
// choosing that saw them would pick them.
#include <gtest/gtest.h>

#include <cmath>

#include "qkv/tasks/generator.h"
#include "tiny_models.h"

using namespace qkv;

namespace {

struct Padded {
  io::GptBundle bundle;
  int64_t V = 0;  // the tokenizer's ids: [0, V)
};

Padded padded_model() {
  Padded p;
  p.bundle = qkv_test::tiny_gpt(32, 32);
  p.V = p.bundle.tokenizer->vocab_size();
  p.bundle.config.vocab_size = p.V + 5;
  default_generator().manual_seed(11);
  p.bundle.model = std::make_shared<models::Gpt>(p.bundle.config);
  return p;
}

tasks::GenerateOptions favouring_padding(int64_t V) {
  tasks::GenerateOptions o;
  o.max_new_tokens = 6, o.eos_id = -1, o.logprobs = 8;
  for (int64_t id = V; id < V + 5; ++id) o.logits.logit_bias.push_back({id, 50.0});
  return o;
}

void expect_decodable(const std::vector<tasks::Generation>& r, int64_t V, const char* mode) {
  ASSERT_FALSE(r.empty()) << mode;
  for (const auto& g : r) {
    ASSERT_EQ(g.tokens.size(), 6u) << mode;
    for (int64_t t : g.tokens) EXPECT_LT(t, V) << mode;
    ASSERT_EQ(g.logprobs.size(), g.tokens.size()) << mode;
    for (const auto& lp : g.logprobs) {
      EXPECT_TRUE(std::isfinite(lp.logprob)) << mode;
      ASSERT_EQ(lp.top.size(), 8u) << mode;
      for (const auto& [id, value] : lp.top) EXPECT_LT(id, V) << mode;
    }
  }
}

}  // namespace

TEST(GeneratorPaddedVocab, PaddingIdsAreNeverChosenListedOrSearched) {
  const Padded p = padded_model();
  tasks::Generator gen(p.bundle);
  tasks::GenerateOptions o = favouring_padding(p.V);
  expect_decodable(gen.generate({"the file", "user"}, o), p.V, "greedy");
  o.sample = true, o.num_return_sequences = 8, o.seed = 4, o.logits.temperature = 3.0;
  expect_decodable(gen.generate({"the file", "user"}, o), p.V, "sampled");
  o.sample = false, o.num_beams = 3, o.num_return_sequences = 3;
  expect_decodable(gen.generate({"the file", "user"}, o), p.V, "beam");
  // The log-probabilities are over the tokenizer's ids: all of them listed sum to 1; asked for more
  // than there are, the padding ids are still not listed.
  o = favouring_padding(p.V);
  o.max_new_tokens = 1, o.logprobs = p.V + 5;
  const auto r = gen.generate({"the file"}, o);
  ASSERT_EQ(r[0].logprobs.at(0).top.size(), size_t(p.V));
  double total = 0;
  for (const auto& [id, value] : r[0].logprobs.at(0).top) total += std::exp(value);
  EXPECT_NEAR(total, 1.0, 1e-9);
  EXPECT_NO_THROW(tasks::logprobs_json(*p.bundle.tokenizer, r[0], false));
  // Beams: no more than the tokenizer's ids.
  o = favouring_padding(p.V);
  o.num_beams = int(p.V) + 1;
  EXPECT_THROW(gen.generate({"the file"}, o), Error);
}

TEST(GeneratorPaddedVocab, AnEosIdAmongThePaddingStillEndsACompletion) {
  const Padded p = padded_model();
  tasks::Generator gen(p.bundle);
  tasks::GenerateOptions o = favouring_padding(p.V);
  o.eos_id = p.V + 2;
  for (bool beams : {false, true}) {
    o.num_beams = beams ? 2 : 1;
    const auto r = gen.generate({"the file"}, o);
    ASSERT_EQ(r[0].tokens.size(), 1u) << beams;
    EXPECT_EQ(r[0].tokens[0], p.V + 2) << beams;
    EXPECT_EQ(r[0].finish, "eos") << beams;
    EXPECT_EQ(r[0].text, "") << beams;
    // The eos adds no text to the JSON of log-probabilities either (decoding it threw).
    const nlohmann::json lp = tasks::logprobs_json(*p.bundle.tokenizer, r[0], false);
    EXPECT_EQ(lp["tokens"], nlohmann::json::array({""})) << beams;
  }
}
