// tasks::Generator and decode/logits_process against PyTorch (tools/refs/gpt_generate.py): greedy
// completions of a GPT-2 (pre-LN) and a GPT-1 (post-LN) reference model, plain, with the
// repetition penalty, with the presence and frequency penalties, with n-gram blocking and with an
// eos held back for min_new_tokens, one at a time and as one left-padded batch; cached logits
// against the full forward (one row, and a left-padded batch with a two-token step); seeded
// sampling batched vs one prompt at a time; the logit filters against Hugging Face's algorithms;
// eos, stop strings, streaming and the context limit; the log-probabilities of generated and
// prompt tokens (with the most likely tokens at each position) against torch's log_softmax.
#include "qkv/tasks/generator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "qkv/autograd/node.h"
#include "qkv/kernels/bf16.h"
#include "qkv/ops/shape.h"
#include "gpt_refs.h"
#include "helpers.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

const std::vector<std::string> kModels = {"gen_gpt2", "gen_gpt1"};

// Row i of a (N, M) reference of tokens padded with -1.
std::vector<int64_t> ref_row(const Tensor& t, int64_t i) {
  std::vector<int64_t> all = t.to_vector<int64_t>(), row;
  for (int64_t j = 0; j < t.size(1) && all[size_t(i * t.size(1) + j)] >= 0; ++j) row.push_back(all[size_t(i * t.size(1) + j)]);
  return row;
}

// 16 new tokens past eos, sampled with a seed through every filter (temperature 0.9, top-k 20,
// top-p 0.95, repetition penalty 1.1), one prompt at a time.
tasks::GenerateOptions seeded_sampling(kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32) {
  tasks::GenerateOptions o;
  o.precision = precision;
  o.sample = true;
  o.eos_id = -1;
  o.max_new_tokens = 16;
  o.logits = {0.9, 20, 0.95, 1.1};
  o.seed = 7;
  o.batch_size = 1;
  return o;
}

// The options of a reference run: gen_rep Hugging Face's repetition penalty, gen_pf OpenAI's
// presence and frequency penalties, gen_ngram Hugging Face's no_repeat_ngram_size, gen_min an eos
// held back for min_new_tokens, gen none of them.
template <typename Params>
void set_penalties(tasks::GenerateOptions& o, const Params& p, const std::string& which) {
  if (which == "gen_rep") o.logits.repetition_penalty = p["repetition_penalty"];
  if (which == "gen_pf") o.logits.presence_penalty = p["presence_penalty"], o.logits.frequency_penalty = p["frequency_penalty"];
  if (which == "gen_ngram") o.no_repeat_ngram_size = p["no_repeat_ngram_size"];
  if (which == "gen_min") o.eos_id = p["eos_id"], o.min_new_tokens = p["min_new_tokens"];
}

}  // namespace

TEST(Generator, GreedyEqualsTorchOneAtATimeAndBatched) {
  RefFile ref("gpt_generate");
  int checked = 0, ended_by_eos = 0;
  for (auto& c : kModels) {
    SCOPED_TRACE(c);
    tasks::Generator g(load_ref_gpt(ref, c));
    // These small models decode from panels (Generator::decoding_layout); a large one reads its
    // weights in place (rows): both layouts, the same tokens.
    EXPECT_EQ(tasks::Generator::decoding_layout(*g.bundle().model), kernels::PackLayout::panels);
    auto prompts = prompts_of(ref, c);
    for (auto layout : {kernels::PackLayout::panels, kernels::PackLayout::rows}) {
      SCOPED_TRACE(kernels::pack_layout_name(layout));
      g.bundle().model->set_pack_layout(layout);
      for (const char* which : {"gen", "gen_rep", "gen_pf", "gen_ngram", "gen_min"}) {
        SCOPED_TRACE(which);
        tasks::GenerateOptions o;
        o.max_new_tokens = ref.params(c)["max_new"];
        o.eos_id = -1;
        set_penalties(o, ref.params(c), which);
        for (int64_t bs : {1, 5, 2}) {
          o.batch_size = bs;
          auto r = g.generate_ids(prompts, o);
          ASSERT_EQ(r.size(), prompts.size());
          for (size_t i = 0; i < prompts.size(); ++i) {
            const std::vector<int64_t> want = ref_row(ref.get(c, which), int64_t(i));
            EXPECT_EQ(r[i].tokens, want) << "prompt " << i << ", batch " << bs;
            const bool eos = o.eos_id >= 0 && !want.empty() && want.back() == o.eos_id;
            EXPECT_EQ(r[i].finish, eos ? "eos" : "length");
            ++checked, ended_by_eos += eos;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 2 * 2 * 5 * 3 * 5);
  EXPECT_GT(ended_by_eos, 0) << "no gen_min completion reached its eos";
}

// Log-probabilities under the model's own distribution (raw logits, no penalty), of the generated
// tokens (with and without a penalty choosing them) and of the prompts' tokens, with
// the three most likely tokens at each position: torch's float64 log_softmax. fp32: 1e-5 relative
// (at least 1e-5 absolute).
TEST(Generator, LogprobsEqualTorchsLogSoftmaxForGeneratedAndPromptTokens) {
  RefFile ref("gpt_generate");
  const auto near = [](double a, double b) { return std::fabs(a - b) <= 1e-5 * std::max(1.0, std::fabs(b)); };
  int checked = 0;
  for (auto& c : kModels) {
    SCOPED_TRACE(c);
    tasks::Generator g(load_ref_gpt(ref, c));
    const auto prompts = prompts_of(ref, c);
    const std::vector<double> prompt_lp = ref.get(c, "prompt_lp").to_vector<double>();
    const std::vector<int64_t> prompt_top_ids = ref.get(c, "prompt_top_ids").to_vector<int64_t>();
    const std::vector<double> prompt_top_lp = ref.get(c, "prompt_top_lp").to_vector<double>();
    for (const std::string which : {"gen", "gen_rep", "gen_pf", "gen_ngram"}) {
      SCOPED_TRACE(which);
      const Tensor want_lp = ref.get(c, which + "_lp"), top_ids = ref.get(c, which + "_top_ids");
      const std::vector<double> lp = want_lp.to_vector<double>();
      const std::vector<double> top_lp = ref.get(c, which + "_top_lp").to_vector<double>();
      const std::vector<int64_t> tids = top_ids.to_vector<int64_t>();
      const int64_t M = want_lp.size(1), K = top_ids.size(2);
      tasks::GenerateOptions o;
      o.max_new_tokens = ref.params(c)["max_new"];
      o.eos_id = -1;
      o.logprobs = K;
      o.prompt_logprobs = true;
      set_penalties(o, ref.params(c), which);
      for (int64_t bs : {1, 5}) {
        o.batch_size = bs;
        const auto r = g.generate_ids(prompts, o);
        size_t at = 0;  // row of the prompt references
        for (size_t i = 0; i < prompts.size(); ++i) {
          SCOPED_TRACE("prompt " + std::to_string(i) + ", batch " + std::to_string(bs));
          EXPECT_EQ(r[i].tokens, ref_row(ref.get(c, which), int64_t(i)));
          ASSERT_EQ(r[i].logprobs.size(), r[i].tokens.size());
          for (size_t j = 0; j < r[i].tokens.size(); ++j) {
            const auto& t = r[i].logprobs[j];
            const size_t at_ij = i * size_t(M) + j;
            EXPECT_EQ(t.token, r[i].tokens[j]);
            EXPECT_TRUE(near(t.logprob, lp[at_ij])) << j << ": " << t.logprob << " vs " << lp[at_ij];
            ASSERT_EQ(t.top.size(), size_t(K));
            for (int64_t k = 0; k < K; ++k) {
              EXPECT_EQ(t.top[size_t(k)].first, tids[at_ij * size_t(K) + size_t(k)]) << j << " top " << k;
              EXPECT_TRUE(near(t.top[size_t(k)].second, top_lp[at_ij * size_t(K) + size_t(k)])) << j << " top " << k;
            }
            ++checked;
          }
          ASSERT_EQ(r[i].prompt_logprobs.size(), prompts[i].size() - 1);
          EXPECT_EQ(r[i].prompt_ids, prompts[i]);
          for (size_t j = 0; j + 1 < prompts[i].size(); ++j, ++at) {
            const auto& t = r[i].prompt_logprobs[j];
            EXPECT_EQ(t.token, prompts[i][j + 1]);
            EXPECT_TRUE(near(t.logprob, prompt_lp[at])) << j << ": " << t.logprob << " vs " << prompt_lp[at];
            ASSERT_EQ(t.top.size(), size_t(K));
            for (int64_t k = 0; k < K; ++k) {
              EXPECT_EQ(t.top[size_t(k)].first, prompt_top_ids[at * size_t(K) + size_t(k)]);
              EXPECT_TRUE(near(t.top[size_t(k)].second, prompt_top_lp[at * size_t(K) + size_t(k)]));
            }
            ++checked;
          }
        }
        EXPECT_EQ(at, prompt_lp.size());
      }
    }
    // Off by default; logprobs 0: the chosen token's alone.
    tasks::GenerateOptions o;
    o.max_new_tokens = 3;
    const auto off = g.generate_ids({prompts[1]}, o);
    EXPECT_TRUE(off[0].logprobs.empty());
    EXPECT_TRUE(off[0].prompt_logprobs.empty());
    o.logprobs = 0;
    const auto zero = g.generate_ids({prompts[1]}, o);
    ASSERT_EQ(zero[0].logprobs.size(), 3u);
    EXPECT_TRUE(zero[0].logprobs[0].top.empty());
    const size_t row1 = ref.params(c)["max_new"].get<size_t>();  // prompt 1's first generated token
    EXPECT_TRUE(near(zero[0].logprobs[0].logprob, ref.get(c, "gen_lp").to_vector<double>()[row1]));
    o.logprobs = -2;
    EXPECT_MENTIONS(error_of([&] { g.generate_ids({prompts[1]}, o); }), "logprobs must be -1 (off), 0 or a count");
  }
  EXPECT_GT(checked, 300);
}

TEST(Generator, DecodingLayoutIsPanelsUpTo64MiBOfWeightsInFp32AndRowsInBf16AndInt8) {
  // Weights zero (init none: nothing drawn); vocab V, width 1024, one layer with n_inner 1024:
  // V * 1024 + 6,311,936 parameters.
  using kernels::MatmulPrecision;
  auto layout_for = [](int64_t V, MatmulPrecision p) {
    models::GptConfig cfg;
    cfg.vocab_size = V, cfg.n_positions = 8, cfg.n_embd = 1024, cfg.n_head = 8, cfg.n_layer = 1, cfg.n_inner = 1024;
    Generator init(0);
    const models::Gpt m(cfg, init, nn::init::Scheme::none);
    return std::make_pair(m.num_parameters() * 4, tasks::Generator::decoding_layout(m, p));
  };
  const auto [small_bytes, small] = layout_for(10200, MatmulPrecision::fp32);  // 16,756,736 parameters: under 64 MiB
  const auto [large_bytes, large] = layout_for(10240, MatmulPrecision::fp32);  // 16,797,696: just over
  ASSERT_LE(small_bytes, int64_t(64) << 20);
  ASSERT_GT(large_bytes, int64_t(64) << 20);
  EXPECT_EQ(small, kernels::PackLayout::panels);
  EXPECT_EQ(large, kernels::PackLayout::rows);
  // int8's own form reads s8 rows whatever the size (a weight too small for int8 takes the fp32
  // form, in the fp32 form's layout).
  EXPECT_EQ(layout_for(10200, MatmulPrecision::int8).second, kernels::PackLayout::rows);
  EXPECT_EQ(layout_for(10200, MatmulPrecision::bf16).second, kernels::PackLayout::rows);
  EXPECT_EQ(layout_for(10240, MatmulPrecision::bf16).second, kernels::PackLayout::rows);
}

TEST(Generator, CachedLogitsEqualTheFullForward) {
  RefFile ref("gpt_generate");
  for (auto& c : kModels) {
    SCOPED_TRACE(c);
    io::GptBundle b = load_ref_gpt(ref, c);
    b.model->eval();
    NoGradGuard ng;
    const models::Gpt& m = *b.model;
    const int64_t V = m.config().vocab_size;
    // Three rows of 20, 13 and 6 tokens, left-padded to 20: the first step feeds 8 columns (the
    // padding, and the first real tokens of the longer rows), then one two-token step (the general
    // attention path over a padded cache), then single tokens (the fused decode kernel).
    const std::vector<int64_t> lens = {20, 13, 6};
    const int64_t B = 3, T = 20;
    Tensor ids = Tensor::zeros({B, T}, DType::i64), pad = Tensor::zeros({B, T}, DType::u8),
           pos = Tensor::zeros({B, T}, DType::i64);
    for (int64_t r = 0; r < B; ++r)
      for (int64_t j = T - lens[size_t(r)]; j < T; ++j) {
        ids.data<int64_t>()[r * T + j] = (r * 31 + j * 7) % V;
        pos.data<int64_t>()[r * T + j] = j - (T - lens[size_t(r)]);
      }
    for (int64_t r = 0; r < B; ++r)
      for (int64_t j = 0; j < T - lens[size_t(r)]; ++j) pad.data<uint8_t>()[r * T + j] = 1;
    // Both layouts of the packed weights (kernels::PackLayout): panels (a copy, the default) and
    // rows (the weights read in place, what tasks::Generator sets).
    for (auto layout : {kernels::PackLayout::panels, kernels::PackLayout::rows}) {
      SCOPED_TRACE(kernels::pack_layout_name(layout));
      b.model->set_pack_layout(layout);
      models::GptCache cache = m.start();
      std::vector<Tensor> parts;
      std::vector<std::pair<int64_t, int64_t>> steps = {{0, 8}, {8, 10}};
      for (int64_t j = 10; j < T; ++j) steps.push_back({j, j + 1});
      for (const auto& st : steps) {  // every step passes its columns of the padding (row 2's lasts to col 13)
        const int64_t a = st.first, e = st.second;
        auto cols = [&](const Tensor& x) { return contiguous(slice(x, 1, a, e)); };
        parts.push_back(m.step(cols(ids), cache, cols(pos), cols(pad)));
      }
      EXPECT_EQ(cache.length(), T);
      Tensor stepped = concat(parts, 1);  // (B, T, V)
      for (int64_t r = 0; r < B; ++r) {
        SCOPED_TRACE(r);
        const int64_t off = T - lens[size_t(r)];
        // The row alone, unpadded, through the full forward.
        Tensor full = m.forward(contiguous(slice(slice(ids, 0, r, r + 1), 1, off, T)));  // (1, L, V)
        Tensor mine = contiguous(slice(slice(stepped, 0, r, r + 1), 1, off, T));
        EXPECT_CLOSE(mine, full, scaled_tol(full));
      }
    }
  }
}

TEST(Generator, SeededSamplingIsPerPromptBatchedOrNot) {
  RefFile ref("gpt_generate");
  tasks::Generator g(load_ref_gpt(ref, "gen_gpt2"));
  g.bundle().model->set_pack_layout(kernels::PackLayout::rows);  // the large models' layout (panels: above)
  auto prompts = prompts_of(ref, "gen_gpt2");
  tasks::GenerateOptions o = seeded_sampling();
  auto one = g.generate_ids(prompts, o);
  o.batch_size = 5;
  auto all = g.generate_ids(prompts, o);
  o.batch_size = 3;
  auto three = g.generate_ids(prompts, o);
  size_t differs_from_greedy = 0;
  tasks::GenerateOptions greedy = o;
  greedy.sample = false;
  auto gr = g.generate_ids(prompts, greedy);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(all[i].tokens, one[i].tokens) << i;
    EXPECT_EQ(three[i].tokens, one[i].tokens) << i;
    differs_from_greedy += all[i].tokens != gr[i].tokens;
  }
  EXPECT_GT(differs_from_greedy, 0u);  // it samples
  o.seed = 8;
  auto other = g.generate_ids(prompts, o);
  size_t differ = 0;
  for (size_t i = 0; i < prompts.size(); ++i) differ += other[i].tokens != one[i].tokens;
  EXPECT_GT(differ, 0u);  // another seed, other draws
}

// bf16 in the Generator's bf16 layout, rows (Generator::decoding_layout; its products' bits do not
// depend on the batch: test_packed_rows_bf16.cpp): greedy and seeded sampling give the same tokens
// batched (left-padded) or one prompt at a time, as in fp32.
TEST(Generator, Bf16RowsBatchedEqualsOneAtATime) {
  if (!kernels::dnnl_cpu_info().bf16_native())
    GTEST_SKIP() << "oneDNN has no bf16 kernel here (" << kernels::dnnl_cpu_info().isa << "): bf16 is refused";
  RefFile ref("gpt_generate");
  for (auto& c : kModels) {
    SCOPED_TRACE(c);
    tasks::Generator g(load_ref_gpt(ref, c));
    auto prompts = prompts_of(ref, c);
    for (bool sample : {false, true}) {
      SCOPED_TRACE(sample ? "sampled" : "greedy");
      tasks::GenerateOptions o = seeded_sampling(kernels::MatmulPrecision::bf16);
      o.sample = sample;
      auto one = g.generate_ids(prompts, o);
      for (int64_t bs : {5, 3}) {
        o.batch_size = bs;
        auto batched = g.generate_ids(prompts, o);
        for (size_t i = 0; i < prompts.size(); ++i)
          EXPECT_EQ(batched[i].tokens, one[i].tokens) << "prompt " << i << ", batch " << bs;
      }
    }
  }
}

TEST(LogitsProcess, FiltersEqualHuggingFacesAlgorithms) {
  RefFile ref("gpt_generate");
  Tensor logits = ref.get("filters", "logits");  // (R, V)
  Tensor hist = ref.get("filters", "history");    // (R, 8)
  const int64_t R = logits.size(0), V = logits.size(1), Hn = hist.size(1);
  auto configs = ref.params("filters")["configs"];
  int rows = 0;
  for (size_t i = 0; i < configs.size(); ++i) {
    decode::LogitsOptions o{configs[i][0], configs[i][1], configs[i][2], configs[i][3], configs[i][4], configs[i][5]};
    if (configs[i].size() > 6)
      for (const auto& tb : configs[i][6]) o.logit_bias.emplace_back(tb[0].get<int64_t>(), tb[1].get<double>());
    SCOPED_TRACE("config " + std::to_string(i));
    Tensor want = ref.get("filters", "out" + std::to_string(i));
    std::vector<float> w = want.to_vector<float>(), x = logits.to_vector<float>();
    std::vector<int64_t> h = hist.to_vector<int64_t>();
    for (int64_t r = 0; r < R; ++r) {
      float* row = x.data() + r * V;
      // The history as generated tokens (no prompt), as the reference counts them.
      decode::apply_penalties(row, V, std::vector<int64_t>(h.begin() + r * Hn, h.begin() + (r + 1) * Hn), 0, o);
      decode::warp_logits(row, V, o);
      int kept = 0;
      for (int64_t v = 0; v < V; ++v) {
        const float a = row[v], e = w[size_t(r * V + v)];
        ASSERT_EQ(std::isinf(a), std::isinf(e)) << "row " << r << " token " << v << ": " << a << " vs " << e;
        if (!std::isinf(e)) {
          EXPECT_NEAR(a, e, 1e-6 * std::max(1.f, std::abs(e)));
          ++kept;
        }
      }
      EXPECT_GE(kept, 1);
      ++rows;
    }
  }
  EXPECT_EQ(rows, int(configs.size()) * R);
  EXPECT_GE(std::count_if(configs.begin(), configs.end(), [](const auto& c) { return c.size() > 6; }), 2)
      << "no configuration with a logit bias";
}

TEST(LogitsProcess, SamplingIsTheInverseCdfOfTheKeptTokens) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> l = {0.f, -inf, std::log(2.f), -inf, std::log(5.f)};  // probabilities 1/8, 2/8, 5/8
  EXPECT_EQ(decode::sample_token(l.data(), 5, 0.0), 0);
  EXPECT_EQ(decode::sample_token(l.data(), 5, 0.124), 0);
  EXPECT_EQ(decode::sample_token(l.data(), 5, 0.126), 2);
  EXPECT_EQ(decode::sample_token(l.data(), 5, 0.374), 2);
  EXPECT_EQ(decode::sample_token(l.data(), 5, 0.376), 4);
  EXPECT_EQ(decode::sample_token(l.data(), 5, 0.9999999), 4);
  EXPECT_EQ(decode::argmax_token(l.data(), 5), 4);
  EXPECT_THROW(decode::apply_repetition_penalty(l.data(), 5, {5}, 1.2), Error);
  EXPECT_THROW((decode::LogitsOptions{0.0, 0, 1.0, 1.0}.validate()), Error);
  EXPECT_THROW((decode::LogitsOptions{1.0, 0, 0.0, 1.0}.validate()), Error);
  EXPECT_THROW((decode::LogitsOptions{1.0, -1, 1.0, 1.0}.validate()), Error);
}

TEST(Generator, EosStopStringsAndStreaming) {
  RefFile ref("gpt_generate");
  io::GptBundle b = load_ref_gpt(ref, "gen_gpt2");
  b.tokenizer = ref_char_tokenizer();
  tasks::Generator g(b);
  auto prompts = prompts_of(ref, "gen_gpt2");
  tasks::GenerateOptions o;
  o.max_new_tokens = 16;
  o.eos_id = -1;
  const std::vector<int64_t> free_run = g.generate_ids({prompts[1]}, o)[0].tokens;
  ASSERT_EQ(free_run.size(), 16u);
  const std::string free_text = g.generate_ids({prompts[1]}, o)[0].text;

  // eos: the run ends at the first occurrence of the 5th token, which is kept in tokens, not text.
  o.eos_id = free_run[4];
  const size_t first = size_t(std::find(free_run.begin(), free_run.end(), o.eos_id) - free_run.begin());
  tasks::Generation e = g.generate_ids({prompts[1]}, o)[0];
  EXPECT_EQ(e.finish, "eos");
  EXPECT_EQ(e.tokens, std::vector<int64_t>(free_run.begin(), free_run.begin() + int64_t(first) + 1));
  std::vector<int32_t> before(free_run.begin(), free_run.begin() + int64_t(first));
  EXPECT_EQ(e.text, b.tokenizer->decode(before));

  // A stop string: two characters of the free run's text from its 6th on; the text ends before
  // its first occurrence, and streaming passes exactly that text, one event per token.
  o.eos_id = -1;
  ASSERT_GE(free_text.size(), 8u);
  const std::string stop = free_text.substr(5, 2);
  o.stop = {"never-there", stop};
  std::string streamed;
  int events = 0, lasts = 0;
  o.on_token = [&](const tasks::TokenEvent& ev) {
    streamed += ev.text;
    ++events;
    lasts += ev.last;
    EXPECT_EQ(ev.prompt, 0u);
  };
  tasks::Generation s = g.generate_ids({prompts[1]}, o)[0];
  EXPECT_EQ(s.finish, "stop");
  EXPECT_EQ(s.text, free_text.substr(0, free_text.find(stop)));
  EXPECT_EQ(streamed, s.text);
  EXPECT_EQ(events, int(s.tokens.size()));
  EXPECT_EQ(lasts, 1);
  EXPECT_LT(s.tokens.size(), 16u);
}

TEST(Generator, ContextLimit) {
  RefFile ref("gpt_generate");
  tasks::Generator g(load_ref_gpt(ref, "gen_gpt2"));
  const int64_t P = g.bundle().config.n_positions;  // 40
  tasks::GenerateOptions o;
  o.eos_id = -1;
  o.max_new_tokens = 100;
  std::vector<int64_t> fits(size_t(P - 1), 3), too_long(size_t(P + 5));
  for (size_t i = 0; i < too_long.size(); ++i) too_long[i] = int64_t(i * 7 % 90);
  auto r = g.generate_ids({fits}, o);
  EXPECT_EQ(r[0].tokens.size(), 1u);  // clamped: one position left
  try {
    g.generate_ids({fits, too_long}, o);
    ADD_FAILURE() << "a prompt of " << P + 5 << " tokens was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("prompt 2 has"), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(P + 5) + " tokens"), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(P - 1)), std::string::npos) << m;
  }
  o.truncate_long = true;
  o.quiet = true;
  r = g.generate_ids({too_long}, o);
  EXPECT_TRUE(r[0].truncated);
  EXPECT_EQ(r[0].prompt_tokens, P - 1);
  EXPECT_EQ(r[0].tokens.size(), 1u);
  // The last P - 1 tokens are kept (truncation from the left): the completion of that prompt.
  std::vector<int64_t> tail(too_long.end() - (P - 1), too_long.end());
  EXPECT_EQ(g.generate_ids({tail}, o)[0].tokens, r[0].tokens);
  EXPECT_THROW(g.generate_ids({{}}, o), Error);  // empty, and the model has no bos_token_id
}

// OpenAI's logit_bias: +100 all but forces a token, -100 all but bans one (its values against torch
// are in FiltersEqualHuggingFacesAlgorithms); tokens outside the vocabulary, twice or with a
// non-finite bias are refused by name.
TEST(Generator, LogitBiasForcesAndBansTokensAndIsChecked) {
  RefFile ref("gpt_generate");
  tasks::Generator g(load_ref_gpt(ref, "gen_gpt2"));
  const std::vector<std::vector<int64_t>> p = {{5, 6, 7}};
  tasks::GenerateOptions o;
  o.max_new_tokens = 6, o.eos_id = -1;
  const auto plain = g.generate_ids(p, o);
  o.logits.logit_bias = {{42, 100.0}};
  EXPECT_EQ(g.generate_ids(p, o)[0].tokens, std::vector<int64_t>(6, 42));
  const int64_t first = plain[0].tokens[0];
  o.logits.logit_bias = {{first, -100.0}};
  const auto banned = g.generate_ids(p, o);
  EXPECT_NE(banned[0].tokens[0], first);
  for (int64_t t : banned[0].tokens) EXPECT_NE(t, first);
  // The log-probabilities stay the model's own (before any processing).
  o.logprobs = 0;
  o.logits.logit_bias = {{42, 100.0}};
  const auto lp = g.generate_ids(p, o)[0].logprobs;
  EXPECT_LT(lp[0].logprob, -0.5) << "token 42 is not the model's likely one";
  auto fails = [&](std::vector<std::pair<int64_t, double>> bias) {
    o.logits.logit_bias = std::move(bias);
    return error_of([&] { g.generate_ids(p, o); });
  };
  EXPECT_MENTIONS(fails({{97, 1.0}}), "logit_bias: token 97 outside the vocabulary [0, 97)");
  EXPECT_MENTIONS(fails({{-1, 1.0}}), "logit_bias: token -1 outside");
  EXPECT_MENTIONS(fails({{3, 1.0}, {3, 2.0}}), "logit_bias names token 3 twice");
  EXPECT_MENTIONS(fails({{3, NAN}}), "logit_bias of token 3 must be finite");
}
