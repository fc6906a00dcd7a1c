// tasks::Generator's beam search (num_beams > 1) against Hugging Face's algorithm re-written in
// PyTorch (tools/refs/gpt_beam.py): the K finished hypotheses of four or five prompts, their
// scores and their tokens' log-probabilities, for a GPT-2 (pre-LN) and a GPT-1 (post-LN) reference
// model under seven configurations (length penalties 1, 0.5, 2 and -1; early stopping heuristic,
// never and first, with a prompt where the heuristic stops before "never" finds better; the
// penalties, n-gram blocking and min_new_tokens on log-probabilities), one prompt at a time and
// batched. Then what beam search refuses, and n samples per prompt.
#include <gtest/gtest.h>

#include <cmath>

#include "qkv/tasks/generator.h"
#include "gpt_refs.h"
#include "helpers.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

// A configuration of the reference: [num_beams, length_penalty, early_stopping (false, true or
// "never"), repetition, presence, frequency, no_repeat_ngram, min_new_tokens].
tasks::GenerateOptions options_of(const nlohmann::json& conf, const nlohmann::json& params) {
  tasks::GenerateOptions o;
  o.max_new_tokens = params["max_new"];
  o.eos_id = params["eos_id"];
  o.num_beams = conf[0];
  o.num_return_sequences = o.num_beams;
  o.length_penalty = conf[1];
  using ES = tasks::GenerateOptions::EarlyStopping;
  o.early_stopping = conf[2].is_string() ? ES::never : conf[2].get<bool>() ? ES::first : ES::heuristic;
  o.logits.repetition_penalty = conf[3];
  o.logits.presence_penalty = conf[4];
  o.logits.frequency_penalty = conf[5];
  o.no_repeat_ngram_size = conf[6];
  o.min_new_tokens = conf[7];
  o.logprobs = 0;
  return o;
}

}  // namespace

TEST(GeneratorBeam, HypothesesScoresAndLogprobsEqualTorchOneAtATimeAndBatched) {
  RefFile ref("gpt_beam");
  int checked = 0, expected = 0, by_eos = 0, short_ones = 0;
  for (const std::string c : {"beam_gpt2", "beam_gpt1"}) {
    SCOPED_TRACE(c);
    tasks::Generator g(load_ref_gpt(ref, c));
    const auto prompts = prompts_of(ref, c);
    const nlohmann::json params = ref.params(c);
    for (const auto& [name, conf] : params["configs"].items()) {
      SCOPED_TRACE(name);
      tasks::GenerateOptions o = options_of(conf, params);
      const int64_t K = o.num_beams;
      const Tensor want = ref.get(c, name);  // (N, K, M)
      const int64_t M = want.size(2);
      const std::vector<int64_t> toks = want.to_vector<int64_t>();
      const std::vector<double> scores = ref.get(c, name + "_score").to_vector<double>();
      const std::vector<double> lps = ref.get(c, name + "_lp").to_vector<double>();
      for (int64_t bs : {1, 4, 3}) {
        o.batch_size = bs;
        expected += int(prompts.size() * size_t(K));
        const auto r = g.generate_ids(prompts, o);
        ASSERT_EQ(r.size(), prompts.size() * size_t(K));
        for (size_t i = 0; i < prompts.size(); ++i)
          for (int64_t j = 0; j < K; ++j) {
            SCOPED_TRACE("prompt " + std::to_string(i) + " hypothesis " + std::to_string(j) + " batch " +
                         std::to_string(bs));
            const tasks::Generation& h = r[i * size_t(K) + size_t(j)];
            const size_t row = (i * size_t(K) + size_t(j)) * size_t(M);
            std::vector<int64_t> w;
            for (int64_t t = 0; t < M && toks[row + size_t(t)] >= 0; ++t) w.push_back(toks[row + size_t(t)]);
            EXPECT_EQ(h.tokens, w);
            // fp32 against torch's float64: 1e-5 relative (at least 1e-5 absolute).
            EXPECT_TRUE(near_fp32(h.score, scores[i * size_t(K) + size_t(j)]))
                << h.score << " vs " << scores[i * size_t(K) + size_t(j)];
            const bool eos = !w.empty() && w.back() == o.eos_id;
            EXPECT_EQ(h.finish, eos ? "eos" : "length");
            ASSERT_EQ(h.logprobs.size(), h.tokens.size());
            for (size_t t = 0; t < w.size(); ++t) {
              EXPECT_EQ(h.logprobs[t].token, w[t]);
              EXPECT_TRUE(near_fp32(h.logprobs[t].logprob, lps[row + t])) << t;
            }
            EXPECT_EQ(h.prompt_tokens, int64_t(prompts[i].size()));
            ++checked, by_eos += eos;
            short_ones += int64_t(w.size()) < std::min<int64_t>(M, 40 - int64_t(prompts[i].size()));
          }
      }
    }
  }
  EXPECT_EQ(checked, expected);
  EXPECT_GE(checked, 2 * 3 * 4 * (4 + 3 + 2 + 3 + 4 + 3 + 3));
  EXPECT_GT(by_eos, 0) << "no hypothesis ended at eos";
  EXPECT_GT(short_ones, 0) << "no hypothesis ended before the length limit";
}

// Fewer returned sequences are the first of the K; one beam is greedy decoding.
TEST(GeneratorBeam, ReturnsTheBestFirstAndOneBeamIsGreedy) {
  RefFile ref("gpt_beam");
  tasks::Generator g(load_ref_gpt(ref, "beam_gpt1"));
  const auto prompts = prompts_of(ref, "beam_gpt1");
  tasks::GenerateOptions o = options_of(ref.params("beam_gpt1")["configs"]["beam4"], ref.params("beam_gpt1"));
  const auto all = g.generate_ids(prompts, o);
  o.num_return_sequences = 2;
  const auto two = g.generate_ids(prompts, o);
  ASSERT_EQ(two.size(), 2 * prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i)
    for (size_t j = 0; j < 2; ++j) EXPECT_EQ(two[2 * i + j].tokens, all[4 * i + j].tokens);
  for (size_t i = 0; i < all.size(); ++i)
    if (i % 4 != 0) {
      EXPECT_GE(all[i - 1].score, all[i].score);
    }
}

TEST(GeneratorBeam, RefusesWhatItCannotDo) {
  RefFile ref("gpt_beam");
  tasks::Generator g(load_ref_gpt(ref, "beam_gpt2"));
  const std::vector<std::vector<int64_t>> p = {{1, 2, 3}};
  auto fails = [&](auto set) {
    tasks::GenerateOptions o;
    o.num_beams = 3;
    set(o);
    return error_of([&] { g.generate_ids(p, o); });
  };
  EXPECT_MENTIONS(fails([](auto& o) { o.sample = true; }), "does not sample");
  EXPECT_MENTIONS(fails([](auto& o) { o.on_token = [](const tasks::TokenEvent&) {}; }), "cannot stream");
  EXPECT_MENTIONS(fails([](auto& o) { o.stop = {"x"}; }), "stop strings are not supported with beam search");
  EXPECT_MENTIONS(fails([](auto& o) { o.num_return_sequences = 4; }), "must not exceed num_beams (3)");
  EXPECT_MENTIONS(fails([](auto& o) { o.length_penalty = NAN; }), "length_penalty must be finite");
  EXPECT_MENTIONS(fails([](auto& o) { o.num_beams = 0; }), "num_beams must be >= 1");
  const int64_t V = g.bundle().model->config().vocab_size;
  EXPECT_MENTIONS(fails([&](auto& o) { o.num_beams = V + 1; }), "exceeds the vocabulary (" + std::to_string(V));
  EXPECT_MENTIONS(fails([](auto& o) { o.num_beams = 1, o.num_return_sequences = 2; }),
                  "greedy decoding has one completion per prompt");
}

// n samples of a prompt are n copies of it: prompt i's j-th draws from stream i * n + j.
TEST(GeneratorBeam, SamplesPerPromptAreCopiesOfThePrompt) {
  RefFile ref("gpt_beam");
  tasks::Generator g(load_ref_gpt(ref, "beam_gpt2"));
  const auto prompts = prompts_of(ref, "beam_gpt2");
  tasks::GenerateOptions o;
  o.sample = true;
  o.max_new_tokens = 8;
  o.seed = 3;
  o.eos_id = -1;
  o.num_return_sequences = 3;
  const auto r = g.generate_ids({prompts[0], prompts[2]}, o);
  o.num_return_sequences = 1;
  const auto copies = g.generate_ids({prompts[0], prompts[0], prompts[0], prompts[2], prompts[2], prompts[2]}, o);
  ASSERT_EQ(r.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(r[i].tokens, copies[i].tokens) << i;
  EXPECT_NE(r[0].tokens, r[1].tokens);
}
