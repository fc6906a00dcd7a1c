// Beam search and greedy decoding against an independent Python beam search
// (tools/refs/decode_beam.py) over the same fixed table model.
#include "qkv/decode/search.h"

#include <gtest/gtest.h>

#include <algorithm>
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
    auto out = decode::translate(*k.model, k.src, k.pad, {p["bos"], p["eos"], p["pad"]}, options(p));
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
    b1.alpha = 0.9;     // the length penalty must not change a beam of one
    b1.patience = 1.0;  // (a patience above 1 searches on past the first ending, unlike greedy)
    auto greedy = decode::greedy(*k.model, k.src, k.pad, {p["bos"], p["eos"], p["pad"]}, g);
    auto beam1 = decode::beam_search(*k.model, k.src, k.pad, {p["bos"], p["eos"], p["pad"]}, b1);
    for (size_t s = 0; s < greedy.size(); ++s) {
      EXPECT_EQ(greedy[s][0].tokens, beam1[s][0].tokens) << c << " sentence " << s;
      EXPECT_NEAR(greedy[s][0].logprob, beam1[s][0].logprob, 1e-9);
    }
  }
}

// A model whose favourite tokens are <pad> and <s>: greedy, beam and sampling never emit them;
// greedy takes the most probable other token at every step, and log-probabilities stay the
// model's own (the softmax over the whole vocabulary, <pad> and <s> included).
TEST(Decode, NeverEmitsPadOrBos) {
  constexpr int64_t V = 7, T = 12, kPad = 0, kBos = 1, kEos = 2;
  Generator gen(21);
  std::vector<float> w(size_t(V * V)), pt(size_t(T * V)), sb(size_t(2 * V));
  for (auto* v : {&w, &pt, &sb})
    for (auto& x : *v) x = float(gen.uniform1()) - 0.5f;
  for (int64_t a = 0; a < V; ++a) w[size_t(a * V + kPad)] += 4.f, w[size_t(a * V + kBos)] += 3.f;
  TableModel m(Tensor::from_vector(w, {V, V}), Tensor::from_vector(pt, {T, V}), Tensor::from_vector(sb, {2, V}), T);
  Tensor src = Tensor::zeros({2, 3}, DType::i64), pad = Tensor::zeros({2, 3}, DType::u8);
  decode::Options o;
  o.max_len_ratio = 0;
  o.max_len_extra = T - 2;
  auto contains = [](const std::vector<int64_t>& t, int64_t v) { return std::find(t.begin(), t.end(), v) != t.end(); };

  auto greedy = decode::greedy(m, src, pad, {kBos, kEos, kPad}, o);
  for (int64_t b = 0; b < 2; ++b) {
    const auto& h = greedy[size_t(b)][0];
    ASSERT_FALSE(h.tokens.empty());
    double sum = 0;
    int64_t prev = kBos;
    for (size_t t = 0; t < h.tokens.size(); ++t) {  // replay: logits(t, prev) = W[prev] + P[t] + S[b]
      std::vector<double> x(static_cast<size_t>(V));
      double mx = -INFINITY, z = 0;
      for (int64_t v = 0; v < V; ++v)
        mx = std::max(mx, x[size_t(v)] = double(w[size_t(prev * V + v)]) + pt[size_t(int64_t(t) * V + v)] +
                                             sb[size_t(b * V + v)]);
      for (double v : x) z += std::exp(v - mx);
      const int64_t tok = h.tokens[t];
      EXPECT_TRUE(tok != kPad && tok != kBos) << "sentence " << b << " step " << t;
      for (int64_t v = 2; v < V; ++v) EXPECT_LE(x[size_t(v)], x[size_t(tok)]) << "step " << t << " token " << v;
      sum += x[size_t(tok)] - mx - std::log(z);
      prev = tok;
    }
    EXPECT_NEAR(h.logprob, sum, 1e-5 * (1 + std::abs(sum)));
  }
  o.beam = o.nbest = 3;
  for (auto& sent : decode::beam_search(m, src, pad, {kBos, kEos, kPad}, o))
    for (auto& h : sent) EXPECT_FALSE(contains(h.tokens, kPad) || contains(h.tokens, kBos));
  o.beam = o.nbest = 1;
  o.sample = true;
  for (uint64_t seed = 0; seed < 5; ++seed) {
    o.seed = seed;
    for (auto& sent : decode::greedy(m, src, pad, {kBos, kEos, kPad}, o))
      EXPECT_FALSE(contains(sent[0].tokens, kPad) || contains(sent[0].tokens, kBos)) << "seed " << seed;
  }
  // Without a <pad> id, token 0 is an ordinary token (and this model's favourite).
  o.sample = false;
  EXPECT_TRUE(contains(decode::greedy(m, src, pad, {kBos, kEos}, o)[0][0].tokens, kPad));
}

// The unknown token is passed over like <pad> unless Options::allow_unk (Marian's default): a
// model whose favourite token is <unk> never emits it from greedy, beam or sampling, emits it when
// allowed, and an <unk> that is also </s> (GPT-2's <|endoftext|>) still ends hypotheses.
TEST(Decode, PassesOverUnkUnlessAllowed) {
  constexpr int64_t V = 7, T = 12, kPad = 0, kBos = 1, kEos = 2, kUnk = 3;
  Generator gen(22);
  std::vector<float> w(size_t(V * V)), pt(size_t(T * V)), sb(size_t(2 * V));
  for (auto* v : {&w, &pt, &sb})
    for (auto& x : *v) x = float(gen.uniform1()) - 0.5f;
  for (int64_t a = 0; a < V; ++a) w[size_t(a * V + kUnk)] += 4.f;
  TableModel m(Tensor::from_vector(w, {V, V}), Tensor::from_vector(pt, {T, V}), Tensor::from_vector(sb, {2, V}), T);
  Tensor src = Tensor::zeros({2, 3}, DType::i64), pad = Tensor::zeros({2, 3}, DType::u8);
  decode::Options o;
  o.max_len_ratio = 0;
  o.max_len_extra = T - 2;
  auto contains = [](const std::vector<int64_t>& t, int64_t v) { return std::find(t.begin(), t.end(), v) != t.end(); };
  const decode::SpecialIds ids{kBos, kEos, kPad, kUnk};

  auto banned = decode::greedy(m, src, pad, ids, o);
  auto no_unk_id = decode::greedy(m, src, pad, {kBos, kEos, kPad}, o);  // unk -1: nothing more to ban
  o.allow_unk = true;
  auto allowed = decode::greedy(m, src, pad, ids, o);
  for (size_t b = 0; b < 2; ++b) {
    const auto &h = banned[b][0].tokens, &a = allowed[b][0].tokens;
    ASSERT_FALSE(a.empty());
    EXPECT_EQ(a[0], kUnk) << "sentence " << b;  // the model's favourite, once allowed
    EXPECT_FALSE(contains(h, kUnk)) << "sentence " << b;
    EXPECT_EQ(no_unk_id[b][0].tokens, a) << "sentence " << b;
  }
  o.allow_unk = false;
  o.beam = o.nbest = 3;
  for (auto& sent : decode::beam_search(m, src, pad, ids, o))
    for (auto& h : sent) EXPECT_FALSE(contains(h.tokens, kUnk));
  o.beam = o.nbest = 1;
  o.sample = true;
  for (uint64_t seed = 0; seed < 5; ++seed) {
    o.seed = seed;
    for (auto& sent : decode::greedy(m, src, pad, ids, o))
      EXPECT_FALSE(contains(sent[0].tokens, kUnk)) << "seed " << seed;
  }
  // <unk> the same token as </s>: the first step ends every sentence, as the favourite should.
  o.sample = false;
  for (auto& sent : decode::greedy(m, src, pad, {kBos, kUnk, kPad, kUnk}, o))
    EXPECT_EQ(sent[0].tokens, std::vector<int64_t>{kUnk});
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
  auto s1 = decode::translate(*k.model, k.src, k.pad, {p["bos"], p["eos"], p["pad"]}, o);
  decode::Options g = o;
  g.sample = false;
  auto gr = decode::translate(*k.model, k.src, k.pad, {p["bos"], p["eos"], p["pad"]}, g);
  for (size_t s = 0; s < gr.size(); ++s) EXPECT_EQ(s1[s][0].tokens, gr[s][0].tokens);
  o.top_k = 0;
  o.temperature = 1.5;
  auto a = decode::translate(*k.model, k.src, k.pad, {p["bos"], p["eos"], p["pad"]}, o);
  auto b = decode::translate(*k.model, k.src, k.pad, {p["bos"], p["eos"], p["pad"]}, o);
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
  expect_refused(bad, "nbest must be in [1, beam = 1], got -1");
  bad = o, bad.beam = 2, bad.nbest = 3;
  expect_refused(bad, "nbest must be in [1, beam = 2], got 3");
  // A patience below 1 keeps fewer endings than the beam is wide: nbest above them was cut silently.
  bad = o, bad.beam = 4, bad.nbest = 4, bad.patience = 0.25;
  expect_refused(bad, "nbest 4 is more than the 1 endings beam search keeps (round(patience 0.25 x beam 4))");
  bad = o, bad.beam = 1, bad.sample = true, bad.top_k = -1;
  expect_refused(bad, "top_k must be >= 0");
  bad = o, bad.max_len_ratio = std::nan("");
  expect_refused(bad, "max_len_ratio must be a finite number >= 0");
  bad = o, bad.max_len_extra = -1;
  expect_refused(bad, "max_len_extra must be >= 0");
  bad = o, bad.alpha = std::nan("");
  expect_refused(bad, "alpha (the length penalty's exponent) must be finite");
  bad = o, bad.beam = 0;  // named as the beam, not as "nbest must be in [1, beam = 0]"
  expect_refused(bad, "beam must be >= 1, got 0");
  // Special ids outside the vocabulary (an eos of 99 in a smaller one ended nothing).
  const int64_t V = k.model->tgt_vocab();
  for (const auto& [ids, what] : std::vector<std::pair<decode::SpecialIds, std::string>>{
           {{1, V}, "eos id must be -1 (none) or in [0, " + std::to_string(V) + "), got " + std::to_string(V)},
           {{-1, 2}, "bos id must be in [0, " + std::to_string(V) + "), got -1"},
           {{1, 2, V + 5}, "pad id must be -1 (none)"},
           {{1, 2, 0, -2}, "unk id must be -1 (none)"}})
    for (int beam : {1, 2}) {
      bad = o, bad.beam = beam;
      try {
        decode::translate(*k.model, k.src, k.pad, ids, bad);
        ADD_FAILURE() << "accepted: " << what;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      }
    }

  // A huge ratio is the model's own cap, not an overflowed conversion that cut every output to one token.
  decode::Options capped = o, huge = o;
  capped.max_len_ratio = 1000, huge.max_len_ratio = 1e30;
  auto a = decode::translate(*k.model, k.src, k.pad, {1, 2}, capped);
  auto b = decode::translate(*k.model, k.src, k.pad, {1, 2}, huge);
  ASSERT_EQ(a.size(), b.size());
  for (size_t s = 0; s < a.size(); ++s) EXPECT_EQ(a[s][0].tokens, b[s][0].tokens) << s;
}
