// Beam search and greedy decoding against an independent Python beam search
// (tools/refs/decode_beam.py) over the same fixed table model.
#include "qkv/decode/search.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ref.h"
#include "table_model.h"

using namespace qkv;
using namespace qkv::testing;

namespace {
struct Case {
  std::unique_ptr<TableModel> model;
  Tensor src, pad;
};
Case make(const RefFile& ref, const std::string& c) {
  auto p = ref.params(c);
  Case k;
  k.model = std::make_unique<TableModel>(ref.get(c, "W"), ref.get(c, "P"), ref.get(c, "S"), p["model_max_len"]);
  std::vector<int64_t> lens = ref.get(c, "src_len").to_vector<int64_t>();
  int64_t B = int64_t(lens.size()), S = 6;
  k.src = Tensor::full({B, S}, 5, DType::i64);
  k.pad = Tensor::zeros({B, S}, DType::u8);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = lens[size_t(b)]; s < S; ++s) k.pad.data<uint8_t>()[b * S + s] = 1;
  return k;
}
decode::Options options(const nlohmann::json& p) {
  decode::Options o;
  o.beam = p["beam"];
  o.alpha = p["alpha"];
  o.nbest = p["nbest"];
  o.patience = p["patience"];
  o.max_len_ratio = p["max_len_ratio"];
  o.max_len_extra = p["max_len_extra"];
  return o;
}
}  // namespace

// tools/refs/decode_beam.py writes one case per (beam, alpha, nbest, patience) it lists: nine.
constexpr size_t kBeamCases = 9;

TEST(BeamSearch, MatchesReferenceBeamSearch) {
  RefFile ref("decode_beam");
  ASSERT_EQ(ref.cases().size(), kBeamCases);
  size_t ran = 0;
  for (const auto& c : ref.cases()) {
    ++ran;
    SCOPED_TRACE(c);
    auto p = ref.params(c);
    Case k = make(ref, c);
    auto out = decode::translate(*k.model, k.src, k.pad, {p["bos"], p["eos"]}, options(p));
    std::vector<int64_t> counts = ref.get(c, "counts").to_vector<int64_t>();
    Tensor toks = ref.get(c, "tokens");
    std::vector<double> lps = ref.get(c, "logprob").to_vector<double>();
    std::vector<double> scores = ref.get(c, "score").to_vector<double>();
    int64_t row = 0, W = toks.size(1);
    ASSERT_EQ(out.size(), counts.size());
    for (size_t b = 0; b < counts.size(); ++b) {
      ASSERT_EQ(int64_t(out[b].size()), counts[b]) << "sentence " << b;
      for (const auto& h : out[b]) {
        std::vector<int64_t> expect;
        for (int64_t j = 0; j < W; ++j) {
          int64_t t = toks.data<int64_t>()[row * W + j];
          if (t >= 0) expect.push_back(t);
        }
        EXPECT_EQ(h.tokens, expect) << "sentence " << b << " hypothesis row " << row;
        // Log-probabilities: qkv sums float log-softmax values, the reference doubles.
        EXPECT_NEAR(h.logprob, lps[size_t(row)], 1e-5 * (1 + std::abs(lps[size_t(row)])));
        EXPECT_NEAR(h.score, scores[size_t(row)], 1e-5 * (1 + std::abs(scores[size_t(row)])));
        ++row;
      }
    }
  }
  EXPECT_EQ(ran, kBeamCases);
}

TEST(BeamSearch, BeamOneEqualsGreedy) {
  RefFile ref("decode_beam");
  ASSERT_EQ(ref.cases().size(), kBeamCases);
  for (const auto& c : ref.cases()) {
    Case k = make(ref, c);
    auto p = ref.params(c);
    decode::Options g = options(p), b1 = options(p);
    g.beam = b1.beam = 1;
    g.nbest = b1.nbest = 1;
    b1.alpha = 0.9;  // the length penalty must not change a beam of one
    auto greedy = decode::greedy(*k.model, k.src, k.pad, {p["bos"], p["eos"]}, g);
    auto beam1 = decode::beam_search(*k.model, k.src, k.pad, {p["bos"], p["eos"]}, b1);
    for (size_t s = 0; s < greedy.size(); ++s) {
      EXPECT_EQ(greedy[s][0].tokens, beam1[s][0].tokens) << c << " sentence " << s;
      EXPECT_NEAR(greedy[s][0].logprob, beam1[s][0].logprob, 1e-9);
    }
  }
}

TEST(Sampling, SeededAndRespectsTopK) {
  RefFile ref("decode_beam");
  std::string c = ref.cases().front();
  Case k = make(ref, c);
  auto p = ref.params(c);
  decode::Options o = options(p);
  o.beam = o.nbest = 1;
  o.sample = true;
  o.seed = 7;
  o.top_k = 1;  // top-1 sampling is greedy
  auto s1 = decode::translate(*k.model, k.src, k.pad, {p["bos"], p["eos"]}, o);
  decode::Options g = o;
  g.sample = false;
  auto gr = decode::translate(*k.model, k.src, k.pad, {p["bos"], p["eos"]}, g);
  for (size_t s = 0; s < gr.size(); ++s) EXPECT_EQ(s1[s][0].tokens, gr[s][0].tokens);
  o.top_k = 0;
  o.temperature = 1.5;
  auto a = decode::translate(*k.model, k.src, k.pad, {p["bos"], p["eos"]}, o);
  auto b = decode::translate(*k.model, k.src, k.pad, {p["bos"], p["eos"]}, o);
  for (size_t s = 0; s < a.size(); ++s) EXPECT_EQ(a[s][0].tokens, b[s][0].tokens);
}

TEST(Decode, BadOptionsThrow) {
  RefFile ref("decode_beam");
  std::string c = ref.cases().front();
  Case k = make(ref, c);
  decode::Options o;
  o.beam = 0;
  EXPECT_THROW(decode::translate(*k.model, k.src, k.pad, {1, 2}, o), Error);
  o.beam = 2;
  o.nbest = 3;
  EXPECT_THROW(decode::translate(*k.model, k.src, k.pad, {1, 2}, o), Error);
  o.nbest = 1;
  o.sample = true;
  EXPECT_THROW(decode::translate(*k.model, k.src, k.pad, {1, 2}, o), Error);
  o.sample = false;

  // Each bad value is refused by name, before any work (a beam of 2e9 once allocated all memory).
  auto expect_refused = [&](decode::Options bad, const std::string& what) {
    try {
      decode::translate(*k.model, k.src, k.pad, {1, 2}, bad);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  decode::Options bad = o;
  bad.beam = int(k.model->tgt_vocab()) + 1;
  expect_refused(bad, "beam must be at most the target vocabulary");
  bad = o, bad.beam = 1, bad.nbest = -1;
  expect_refused(bad, "nbest must be in [1, beam]");
  bad = o, bad.max_len_ratio = std::nan("");
  expect_refused(bad, "max_len_ratio must be a finite number >= 0");
  bad = o, bad.max_len_extra = -1;
  expect_refused(bad, "max_len_extra must be >= 0");
  bad = o, bad.alpha = std::nan("");
  expect_refused(bad, "alpha (the length penalty's exponent) must be finite");

  // A huge ratio is the model's own cap, not an overflowed conversion that cut every output to one token.
  decode::Options capped = o, huge = o;
  capped.max_len_ratio = 1000, huge.max_len_ratio = 1e30;
  auto a = decode::translate(*k.model, k.src, k.pad, {1, 2}, capped);
  auto b = decode::translate(*k.model, k.src, k.pad, {1, 2}, huge);
  ASSERT_EQ(a.size(), b.size());
  for (size_t s = 0; s < a.size(); ++s) EXPECT_EQ(a[s][0].tokens, b[s][0].tokens) << s;
}
