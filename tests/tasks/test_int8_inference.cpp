// int8 inference (TranslateOptions / GenerateOptions / EmbedOptions::precision int8): every
// model's int8 forward stays within a stated distance of its fp32 forward; the large weights are
// quantized once and reused (counted by kernels::int8_weights_packed), quantized again after a
// weight changes, and only weights that pay (kernels::int8_pays) are quantized; products that
// are recorded for backward never run int8; on a CPU (or oneDNN ISA cap) without AVX512-VNNI or
// AMX the tasks run qkv's own kernel, with the same tokens.
//
// Distance: max |int8 - fp32| / max |fp32| over the output (the max-relative error). The models'
// tests quantize every weight (threshold 0), the worst case; the bounds are about 1.5x what was
// measured on an Intel Xeon (AVX512-VNNI) with these seeds. The error is the quantization's
// (about 1% of a product's largest output, BENCHMARKS.md): the kernel itself equals the integer
// scheme exactly (tests/kernels/test_gemm_int8.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "death_result.h"
#include "decode_bench_shapes.h"
#include "qkv/autograd/node.h"
#include "qkv/kernels/bf16.h"
#include "qkv/kernels/int8.h"
#include "qkv/models/bert.h"
#include "qkv/models/gpt.h"
#include "qkv/models/transformer.h"
#include "qkv/nn/init.h"
#include "qkv/nn/layers.h"
#include "qkv/ops/matmul.h"
#include "qkv/tasks/translator.h"
#include "qkv/tensor/rng.h"
#include "int8_threshold.h"
#include "precision_compare.h"
#include "ref.h"

using namespace qkv;
using kernels::MatmulPrecision;
using qkv::testing::Int8SmallWeightRows;
using qkv::testing::Int8Threshold;
using qkv::testing::max_rel;
using qkv::testing::random_ids;

namespace {

// f() in fp32 and in int8 with every weight quantized (no grad); checks that int8 quantized
// `weights` weights on its first run and none on its second (bit-identical output), and returns
// the max-relative error.
template <typename F>
double fp32_vs_int8(const char* model, int64_t weights, F f) {
  NoGradGuard ng;
  Int8Threshold all(0);
  Tensor a = f();
  Tensor b, b2;
  const int64_t before = kernels::int8_weights_packed();
  {
    kernels::MatmulPrecisionScope int8(MatmulPrecision::int8);
    b = f();
    EXPECT_EQ(kernels::int8_weights_packed() - before, weights) << model << ": weights quantized";
    b2 = f();
    EXPECT_EQ(kernels::int8_weights_packed() - before, weights) << model << ": weights quantized again";
  }
  EXPECT_EQ(max_rel(b, b2), 0.0) << model << ": the cached int8 form gave another result";
  const double e = max_rel(a, b);
  EXPECT_GT(e, 0.0) << model << ": int8 equals fp32 bit for bit (int8 did not run)";
  std::printf("%s: int8 vs fp32 max-relative error %.3g\n", model, e);
  return e;
}

}  // namespace

TEST(Int8Inference, TransformerForwardNearFp32) {
  SKIP_WITHOUT_INT8();
  Generator g(11);
  models::Transformer m(qkv::testing::decode_bench_transformer(3, 3000), g);
  m.eval();
  Tensor src = random_ids(g, 4, 20, 3, 3000), tgt = random_ids(g, 4, 15, 3, 3000);
  Tensor pad = Tensor::zeros({4, 20}, DType::u8);
  // 3 encoder layers x (qkv, out, fc1, fc2) + 3 decoder layers x (qkv, out, cross q, k, v, out,
  // fc1, fc2) + the output layer. Measured 2.33e-2 (logits (4, 15, 3000)).
  EXPECT_LT(fp32_vs_int8("transformer", 37, [&] { return m.forward(src, pad, tgt); }), 3.5e-2);
}

TEST(Int8Inference, GptForwardNearFp32) {
  SKIP_WITHOUT_INT8();
  Generator g(13);
  models::Gpt m(qkv::testing::decode_bench_gpt(3), g);
  m.eval();
  Tensor ids = random_ids(g, 3, 24, 0, 1000);
  // 3 layers x (c_attn, c_proj, c_fc, mlp c_proj) + the tied head. Measured 2.67e-2 (logits
  // (3, 24, 1000)).
  EXPECT_LT(fp32_vs_int8("gpt", 13, [&] { return m.forward(ids); }), 4e-2);
}

// GPT decoding in int8 in both layouts of the packed weights (tasks::Generator sets rows: s8 rows
// and qkv's batch-1 kernel): the prompt step (24 rows, through oneDNN) and each one-token step
// (1 row, qkv's kernel in the rows layout) give the blocked form's logits bit for bit.
TEST(Int8Inference, GptStepsEqualInBothLayouts) {
  SKIP_WITHOUT_INT8();
  Generator g(15);
  models::Gpt m(qkv::testing::decode_bench_gpt(2), g);
  m.eval();
  const Tensor prompt = random_ids(g, 1, 24, 0, 1000);
  NoGradGuard ng;
  Int8Threshold all(0);
  kernels::MatmulPrecisionScope int8(MatmulPrecision::int8);
  std::vector<std::vector<float>> by_layout[2];
  for (auto layout : {kernels::PackLayout::panels, kernels::PackLayout::rows}) {
    m.set_pack_layout(layout, MatmulPrecision::int8);
    models::GptCache cache = m.start();
    auto& out = by_layout[size_t(layout)];
    Tensor pos = Tensor::empty({1, 24}, DType::i64);
    for (int64_t j = 0; j < 24; ++j) pos.data<int64_t>()[j] = j;
    out.push_back(m.step(prompt, cache, pos).to_vector<float>());
    for (int64_t t = 0; t < 6; ++t) {  // greedy: the last row's argmax, fed back
      const std::vector<float> last(out.back().end() - 1000, out.back().end());
      Tensor next = Tensor::empty({1, 1}, DType::i64), at = Tensor::empty({1, 1}, DType::i64);
      next.data<int64_t>()[0] = std::max_element(last.begin(), last.end()) - last.begin();
      at.data<int64_t>()[0] = 24 + t;
      out.push_back(m.step(next, cache, at).to_vector<float>());
    }
  }
  ASSERT_EQ(by_layout[0].size(), by_layout[1].size());
  for (size_t i = 0; i < by_layout[0].size(); ++i) EXPECT_EQ(by_layout[0][i], by_layout[1][i]) << "step " << i;
}

TEST(Int8Inference, BertHiddenNearFp32) {
  SKIP_WITHOUT_INT8();
  models::BertConfig cfg;
  cfg.vocab_size = 1000, cfg.hidden_size = 256, cfg.num_hidden_layers = 3, cfg.num_attention_heads = 4;
  cfg.intermediate_size = 1024, cfg.max_position_embeddings = 64;
  Generator g(14);
  models::Bert m(cfg, g);
  m.eval();
  Tensor ids = random_ids(g, 3, 24, 1, 1000);
  // 3 layers x (qkv, attention output, intermediate, output). Measured 4.0e-3 (last hidden states
  // (3, 24, 256), post-LN: O(1) values).
  EXPECT_LT(fp32_vs_int8("bert", 12, [&] { return m.hidden(ids); }), 6e-3);
}

// At the default threshold (2^17 values), with the batch rule off (as without AMX), the (256, 256)
// weights of this model stay fp32 (they measured faster there): per layer the attention output,
// and in the decoder the cross-attention's q, k, v and output. The others pay: each layer's Wqkv
// (768, 256), W1 (1024, 256), W2 (256, 1024), 3 x 3 in each stack, and the (3000, 256) output
// layer: 19.
TEST(Int8Inference, DefaultThresholdQuantizesOnlyTheLargeWeights) {
  SKIP_WITHOUT_INT8();
  ASSERT_EQ(kernels::int8_min_weight_elements(), int64_t(1) << 17);
  Int8SmallWeightRows never(0);
  Generator g(17);
  models::Transformer m(qkv::testing::decode_bench_transformer(3, 3000), g);
  m.eval();
  Tensor src = random_ids(g, 2, 9, 3, 3000), tgt = random_ids(g, 2, 7, 3, 3000);
  Tensor pad = Tensor::zeros({2, 9}, DType::u8);
  NoGradGuard ng;
  const int64_t before = kernels::int8_weights_packed();
  kernels::MatmulPrecisionScope int8(MatmulPrecision::int8);
  m.forward(src, pad, tgt);
  EXPECT_EQ(kernels::int8_weights_packed() - before, 19);
}

// With the batch rule on (kernels::int8_small_weight_min_rows 32, the default on AMX) the 18
// (256, 256) weights above take both forms: a forward whose every product has fewer than 32 rows
// keeps the bits of the rule off (their fp32 panels), and one whose every product has 32 rows or
// more gives the bits of every weight in int8 (the same weights from the same seed).
TEST(Int8Inference, SmallWeightsRunInt8FromTheRowThreshold) {
  SKIP_WITHOUT_INT8();
  ASSERT_EQ(kernels::int8_min_weight_elements(), int64_t(1) << 17);
  Generator g(19), ids(20);
  models::Transformer m(qkv::testing::decode_bench_transformer(3, 3000), g);
  m.eval();
  // small: 2 x 9 source and 2 x 7 target rows (18, 14); large: 4 x 9 and 4 x 8 (36, 32)
  Tensor src_s = random_ids(ids, 2, 9, 3, 3000), tgt_s = random_ids(ids, 2, 7, 3, 3000);
  Tensor src_l = random_ids(ids, 4, 9, 3, 3000), tgt_l = random_ids(ids, 4, 8, 3, 3000);
  Tensor pad_s = Tensor::zeros({2, 9}, DType::u8), pad_l = Tensor::zeros({4, 9}, DType::u8);
  NoGradGuard ng;
  kernels::MatmulPrecisionScope int8(MatmulPrecision::int8);
  Tensor off_s;
  {
    Int8SmallWeightRows never(0);
    off_s = m.forward(src_s, pad_s, tgt_s);
  }
  Tensor all_l;
  {
    Int8Threshold all(0);
    Generator g2(19);
    models::Transformer every(qkv::testing::decode_bench_transformer(3, 3000), g2);
    every.eval();
    all_l = every.forward(src_l, pad_l, tgt_l);
  }
  Int8SmallWeightRows from32(32);
  const int64_t before = kernels::int8_weights_packed();
  const Tensor on_s = m.forward(src_s, pad_s, tgt_s);
  EXPECT_EQ(kernels::int8_weights_packed() - before, 18) << "the (256, 256) weights' int8 forms";
  EXPECT_EQ(on_s.to_vector<float>(), off_s.to_vector<float>()) << "fewer than 32 rows: the fp32 panels";
  const Tensor on_l = m.forward(src_l, pad_l, tgt_l);
  EXPECT_EQ(kernels::int8_weights_packed() - before, 18) << "quantized once";
  EXPECT_EQ(on_l.to_vector<float>(), all_l.to_vector<float>()) << "32 rows or more: every product in int8";
}

// Products recorded for backward never take the int8 form: under an int8 scope a Linear whose
// weight requires grad computes exactly what it computes in fp32, and quantizes nothing.
TEST(Int8Inference, RecordedProductsStayFp32) {
  SKIP_WITHOUT_INT8();
  Int8Threshold all(0);
  Generator g(18);
  nn::Linear lin(64, 48);
  ASSERT_TRUE(lin.weight.requires_grad());
  Tensor x = Tensor::empty({5, 64});
  nn::init::normal(x, 0.0, 1.0, g);
  const Tensor want = lin.forward(x);
  const int64_t before = kernels::int8_weights_packed();
  kernels::MatmulPrecisionScope int8(MatmulPrecision::int8);
  const Tensor got = lin.forward(x);
  EXPECT_EQ(kernels::int8_weights_packed(), before);
  EXPECT_EQ(got.to_vector<float>(), want.to_vector<float>());
}

// Through tasks::Translator: the first int8 call quantizes every weight once; later calls
// quantize none; a weight written in place is quantized again, alone, and the result follows it.
TEST(Int8Inference, TranslatorQuantizesOnceAndAgainAfterAWeightChanges) {
  SKIP_WITHOUT_INT8();
  Int8Threshold all(0);
  Generator g(16);
  io::Seq2SeqBundle bundle;
  const models::TransformerConfig cfg = qkv::testing::decode_bench_transformer(3, 3000);
  bundle.config = {{"model_type", "transformer"}, {"model", cfg}};
  auto model = std::make_shared<models::Transformer>(cfg, g);
  bundle.model = model;
  model->eval();
  const tasks::Translator t(bundle);
  std::vector<std::vector<int64_t>> src;
  for (int i = 0; i < 6; ++i) {
    Tensor ids = random_ids(g, 1, 8 + i, 3, 3000);
    src.emplace_back(ids.data<int64_t>(), ids.data<int64_t>() + ids.numel());
    src.back().push_back(cfg.eos_id);
  }
  tasks::TranslateOptions o;
  o.precision = MatmulPrecision::int8;
  o.search.max_len_ratio = 0, o.search.max_len_extra = 10;

  const int64_t c0 = kernels::int8_weights_packed();
  auto first = t.translate_ids(src, o);
  const int64_t c1 = kernels::int8_weights_packed();
  EXPECT_EQ(c1 - c0, 37);
  auto second = t.translate_ids(src, o);
  EXPECT_EQ(kernels::int8_weights_packed(), c1) << "a second call quantized weights again";
  for (size_t i = 0; i < src.size(); ++i) EXPECT_EQ(first[i][0].tokens, second[i][0].tokens);

  const int64_t winner = 7;  // only the output layer's bias changes; int8 must see it
  model->generator->bias.data<float>()[winner] = 1e4f;
  model->generator->bias.mark_modified();
  auto third = t.translate_ids(src, o);
  EXPECT_EQ(kernels::int8_weights_packed() - c1, 1) << "only the changed layer is quantized again";
  for (size_t i = 0; i < src.size(); ++i) {
    ASSERT_FALSE(third[i][0].tokens.empty());
    for (int64_t tok : third[i][0].tokens) EXPECT_EQ(tok, winner) << "decoded with the old weights";
  }
}

// A small random translation model and the int8 greedy tokens of one source.
std::vector<int64_t> int8_capped_case_tokens() {
  models::TransformerConfig cfg = qkv::testing::decode_bench_transformer(3, 3000);
  cfg.d_model = 16, cfg.heads = 2, cfg.d_ff = 32, cfg.enc_layers = cfg.dec_layers = 1;
  io::Seq2SeqBundle bundle;
  bundle.config = {{"model_type", "transformer"}, {"model", cfg}};
  default_generator().manual_seed(91);
  bundle.model = std::make_shared<models::Transformer>(cfg);
  const tasks::Translator t(bundle);
  tasks::TranslateOptions o;
  o.precision = MatmulPrecision::int8;
  o.search.max_len_ratio = 0, o.search.max_len_extra = 10;
  Int8Threshold every(0);  // every weight in int8
  return t.translate_ids({{5, 6, 7, 8, 9, cfg.eos_id}}, o)[0][0].tokens;
}

std::string joined_tokens(const std::vector<int64_t>& tokens) {
  std::string s = "tokens:";
  for (int64_t t : tokens) s += " " + std::to_string(t);
  return s + ".";
}

// On a CPU without AVX512-VNNI or AMX (here: oneDNN capped to plain AVX-512 in a child process,
// where its int8 kernels would saturate) the tasks run int8 on qkv's own kernel. Exit 3: the
// tokens handed back (death_result.h); 2: the cap did not take; 1: no file written.
[[noreturn]] void translate_int8_with_avx512_core_cap() {
  setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE", 1);
  if (kernels::int8_native()) _exit(2);
  _exit(qkv::testing::write_death_result(joined_tokens(int8_capped_case_tokens())) ? 3 : 1);
}

// ... with the tokens of an uncapped run. Nothing may touch oneDNN before EXPECT_EXIT: the child
// re-runs this test from its start, and oneDNN reads the cap once.
TEST(Int8InferenceDeathTest, CappedIsaTranslatesOnQkvsKernelWithTheSameTokens) {
  if (!kernels::int8_own_kernel_built()) GTEST_SKIP() << "qkv's int8 kernel is not built for SIMD here";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(translate_int8_with_avx512_core_cap(), ::testing::ExitedWithCode(3), "");
  const std::optional<std::string> got = qkv::testing::take_death_result();
  ASSERT_TRUE(got.has_value()) << "the child left no result";
  const std::vector<int64_t> want = int8_capped_case_tokens();
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(*got, joined_tokens(want));
}
