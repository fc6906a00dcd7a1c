// Translator::score_ids (forced decoding, tasks/translator.h) on the Transformers of
// tools/refs/models_transformer.py: every target token's log-probability equals log_softmax of
// torch's logits at that token (computed here in double from the reference's logits), for all nine
// models, padded rows included; the batch size changes nothing beyond float rounding; and scoring
// a greedy translation gives back the log-probability the decoder accumulated step by step.
// Tolerance: fp32, 1e-5 relative (at least 1e-5 absolute) on each log-probability and on the sums.
#include <gtest/gtest.h>

#include <cmath>

#include "qkv/autograd/node.h"
#include "qkv/tasks/translator.h"
#include "helpers.h"
#include "transformer_ref.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

tasks::Translator translator_of(const RefFile& ref, const std::string& c) {
  io::Seq2SeqBundle b;
  b.config = {{"model_type", "transformer"}, {"model", ref.params(c)["config"]}};  // pad 0, <s> 1, </s> 2
  b.model = load_transformer_ref(ref, c);
  return tasks::Translator(std::move(b));
}

// Row r of a (B, L) i64 tensor up to its first `pad` (the reference's rows are right-padded).
std::vector<int64_t> row_ids(const Tensor& t, int64_t r, int64_t pad) {
  std::vector<int64_t> ids;
  const int64_t L = t.size(1);
  for (int64_t i = 0; i < L && t.data<int64_t>()[r * L + i] != pad; ++i) ids.push_back(t.data<int64_t>()[r * L + i]);
  return ids;
}

}  // namespace

TEST(TranslatorScore, TokenLogProbabilitiesEqualTorchsLogSoftmaxForEveryModel) {
  RefFile ref("models_transformer");
  ASSERT_EQ(count_transformer_ref_models(ref), kTransformerRefModels.size());
  int64_t checked = 0;
  for (const std::string& c : kTransformerRefModels) {
    SCOPED_TRACE(c);
    const tasks::Translator t = translator_of(ref, c);
    const Tensor src = ref.get(c, "src"), tgt_in = ref.get(c, "tgt_in"), tgt_out = ref.get(c, "tgt_out");
    const Tensor logits = ref.get(c, "logits").contiguous();  // torch's (B, T, V)
    const int64_t B = src.size(0), T = tgt_out.size(1), V = logits.size(2);
    std::vector<std::vector<int64_t>> srcs, tgts;
    for (int64_t b = 0; b < B; ++b) {
      srcs.push_back(row_ids(src, b, 0));
      tgts.push_back(row_ids(tgt_out, b, 0));
      // score_ids feeds <s> then the target shifted right, as the reference's tgt_in does.
      for (size_t i = 0; i < tgts.back().size(); ++i)
        ASSERT_EQ(tgt_in.data<int64_t>()[b * T + int64_t(i)], i == 0 ? 1 : tgts.back()[i - 1]);
    }
    ASSERT_LT(tgts[2].size(), size_t(T));  // the reference pads one target: a padded row is scored too
    tasks::ScoreOptions opt;
    opt.token_logprobs = true;
    for (int64_t batch : {int64_t(1), int64_t(32)}) {
      SCOPED_TRACE(batch);
      opt.batch_size = batch;
      const std::vector<tasks::PairScore> s = t.score_ids(srcs, tgts, opt);
      ASSERT_EQ(s.size(), size_t(B));
      for (int64_t b = 0; b < B; ++b) {
        ASSERT_EQ(s[size_t(b)].tokens, int64_t(tgts[size_t(b)].size()));
        ASSERT_EQ(s[size_t(b)].token_logprobs.size(), tgts[size_t(b)].size());
        double sum = 0;
        for (size_t i = 0; i < tgts[size_t(b)].size(); ++i) {
          const float* row = logits.data<float>() + (b * T + int64_t(i)) * V;
          double mx = row[0], z = 0;
          for (int64_t v = 1; v < V; ++v) mx = std::max(mx, double(row[v]));
          for (int64_t v = 0; v < V; ++v) z += std::exp(double(row[v]) - mx);
          const double lp = double(row[tgts[size_t(b)][i]]) - mx - std::log(z);
          const double got = s[size_t(b)].token_logprobs[i];
          EXPECT_TRUE(near_fp32(got, lp)) << b << " " << i << ": " << got << " vs torch " << lp;
          sum += lp;
          ++checked;
        }
        EXPECT_TRUE(near_fp32(s[size_t(b)].logprob, sum)) << s[size_t(b)].logprob << " vs " << sum;
      }
    }
  }
  EXPECT_EQ(checked, 2 * 9 * (3 * 6 - 2));  // two batch sizes, nine models, 3 rows of 6 less 2 padded
}

TEST(TranslatorScore, AGreedyTranslationScoresTheLogProbabilityTheDecoderAccumulated) {
  RefFile ref("models_transformer");
  for (const std::string& c : kTransformerRefModels) {
    SCOPED_TRACE(c);
    const tasks::Translator t = translator_of(ref, c);
    const Tensor src = ref.get(c, "src");
    std::vector<std::vector<int64_t>> srcs;
    for (int64_t b = 0; b < src.size(0); ++b) srcs.push_back(row_ids(src, b, 0));
    const auto hyps = t.translate_ids(srcs);  // greedy, up to the model's 16 positions
    std::vector<std::vector<int64_t>> tgts;
    for (const auto& h : hyps) tgts.push_back(h.front().tokens);
    const std::vector<tasks::PairScore> s = t.score_ids(srcs, tgts);
    for (size_t b = 0; b < s.size(); ++b) {
      ASSERT_FALSE(tgts[b].empty());
      EXPECT_TRUE(near_fp32(s[b].logprob, hyps[b].front().logprob))
          << s[b].logprob << " vs " << hyps[b].front().logprob;
    }
  }
}

TEST(TranslatorScore, BadPairsAreErrorsNamingThePairAndSide) {
  RefFile ref("models_transformer");
  const tasks::Translator t = translator_of(ref, kTransformerRefModels[0]);
  const int64_t V = t.bundle().model->tgt_vocab();
  const std::string bad_id = error_of([&] { t.score_ids({{5, 2}}, {{V, 2}}); });
  EXPECT_MENTIONS(bad_id, "pair 1: target token id " + std::to_string(V) + " is outside");
  const std::string empty = error_of([&] { t.score_ids({{5, 2}, {}}, {{4, 2}, {4, 2}}); });
  EXPECT_MENTIONS(empty, "pair 2: the source has 0 tokens, expected 1 to 16");
  EXPECT_MENTIONS(error_of([&] { t.score_ids({{5, 2}}, {}); }), "1 sources but 0 targets");
  EXPECT_MENTIONS(error_of([&] { t.score({"a"}, {"b"}); }), "without its tokenizers");
}
