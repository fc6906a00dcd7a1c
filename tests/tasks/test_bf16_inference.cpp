// bf16 inference (TranslateOptions / GenerateOptions / ClassifyOptions / EmbedOptions::precision):
// every model's bf16 forward stays within a stated distance of its fp32 forward; the weights are
// converted to bf16 once and reused (counted by kernels::bf16_weights_packed), and converted again
// after a weight changes; on a CPU (or oneDNN ISA cap) without AMX / AVX512_BF16 the tasks refuse.
//
// Distance: max |bf16 - fp32| / max |fp32| over the output (the max-relative error). The bounds
// below are about 1.5x what was measured on AMD EPYC (AVX512_BF16) with these seeds, so a change
// that makes bf16 markedly less exact fails; fp32 itself sits at ~1e-7 on this scale.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "decode_bench_shapes.h"
#include "qkv/autograd/node.h"
#include "qkv/decode/search.h"
#include "qkv/kernels/bf16.h"
#include "qkv/models/bert.h"
#include "qkv/models/gpt.h"
#include "qkv/models/rnn_seq2seq.h"
#include "qkv/models/transformer.h"
#include "qkv/tasks/translator.h"
#include "qkv/tensor/rng.h"
#include "precision_compare.h"

using namespace qkv;
using kernels::MatmulPrecision;
using qkv::testing::max_rel;
using qkv::testing::random_ids;

namespace {

// f() in fp32 and in bf16 (no grad); checks that bf16 converted weights on its first run, reused
// them on its second (bit-identical output, no conversion), and returns the max-relative error.
template <typename F>
double fp32_vs_bf16(const char* model, F f) {
  NoGradGuard ng;
  Tensor a = f();
  Tensor b, b2;
  const int64_t before = kernels::bf16_weights_packed();
  {
    kernels::MatmulPrecisionScope bf16(MatmulPrecision::bf16);
    b = f();
    const int64_t converted = kernels::bf16_weights_packed() - before;
    EXPECT_GT(converted, 0) << model << ": the bf16 forward converted no weight";
    b2 = f();
    EXPECT_EQ(kernels::bf16_weights_packed() - before, converted) << model << ": weights converted again";
  }
  // Bit-identical: also fails if some product's precision depends on which thread runs it (the
  // fused attention's workers once ran fp32 while the caller ran bf16).
  EXPECT_EQ(max_rel(b, b2), 0.0) << model << ": the cached bf16 form gave another result";
  const double e = max_rel(a, b);
  EXPECT_GT(e, 0.0) << model << ": bf16 equals fp32 bit for bit (bf16 did not run)";
  std::printf("%s: bf16 vs fp32 max-relative error %.3g\n", model, e);
  return e;
}

}  // namespace

TEST(Bf16Inference, TransformerForwardNearFp32) {
  SKIP_WITHOUT_BF16();
  Generator g(11);
  models::Transformer m(qkv::testing::decode_bench_transformer(3, 1000), g);
  m.eval();
  Tensor src = random_ids(g, 4, 20, 3, 1000), tgt = random_ids(g, 4, 15, 3, 1000);
  Tensor pad = Tensor::zeros({4, 20}, DType::u8);
  // Measured 6.2e-3 (logits (4, 15, 1000)).
  EXPECT_LT(fp32_vs_bf16("transformer", [&] { return m.forward(src, pad, tgt); }), 1e-2);
}

TEST(Bf16Inference, RnnSeq2SeqForwardNearFp32) {
  SKIP_WITHOUT_BF16();
  models::RnnSeq2SeqConfig cfg;
  cfg.src_vocab = cfg.tgt_vocab = 500;
  cfg.embed_dim = cfg.enc_hidden = cfg.dec_hidden = 128;
  cfg.input_feeding = true;
  Generator g(12);
  models::RnnSeq2Seq m(cfg, g);
  m.eval();
  Tensor src = random_ids(g, 4, 12, 3, 500), tgt = random_ids(g, 4, 10, 3, 500);
  Tensor pad = Tensor::zeros({4, 12}, DType::u8);
  // The LSTM recurrences stay fp32 (kernels/cpu/rnn.cpp); attention and output layers run bf16.
  // Measured 2.0e-3.
  EXPECT_LT(fp32_vs_bf16("rnn seq2seq (luong general, input feeding)", [&] { return m.forward(src, pad, tgt); }), 3e-3);
  // Incremental decoding (start / step) in bf16: the layers converted above are reused at every step.
  kernels::MatmulPrecisionScope bf16(MatmulPrecision::bf16);
  const int64_t before = kernels::bf16_weights_packed();
  decode::Options o;
  o.max_len_ratio = 0, o.max_len_extra = 8;
  auto hyps = decode::translate(m, src, pad, {cfg.bos_id, cfg.eos_id, cfg.pad_id}, o);
  ASSERT_EQ(hyps.size(), 4u);
  EXPECT_FALSE(hyps[0][0].tokens.empty());
  EXPECT_EQ(kernels::bf16_weights_packed(), before) << "decoding steps converted weights again";
}

TEST(Bf16Inference, GptForwardNearFp32) {
  SKIP_WITHOUT_BF16();
  models::GptConfig cfg;
  cfg.vocab_size = 1000, cfg.n_positions = 64, cfg.n_embd = 256, cfg.n_layer = 3, cfg.n_head = 4;
  Generator g(13);
  models::Gpt m(cfg, g);
  m.eval();
  Tensor ids = random_ids(g, 3, 24, 0, 1000);
  // Measured 6.4e-3 (logits (3, 24, 1000), tied head).
  EXPECT_LT(fp32_vs_bf16("gpt", [&] { return m.forward(ids); }), 9e-3);
}

TEST(Bf16Inference, BertHiddenNearFp32) {
  SKIP_WITHOUT_BF16();
  models::BertConfig cfg;
  cfg.vocab_size = 1000, cfg.hidden_size = 256, cfg.num_hidden_layers = 3, cfg.num_attention_heads = 4;
  cfg.intermediate_size = 1024, cfg.max_position_embeddings = 64;
  Generator g(14);
  models::Bert m(cfg, g);
  m.eval();
  Tensor ids = random_ids(g, 3, 24, 1, 1000);
  // Measured 7.9e-4 (last hidden states (3, 24, 256), post-LN: O(1) values).
  EXPECT_LT(fp32_vs_bf16("bert", [&] { return m.hidden(ids); }), 1.4e-3);
}

TEST(Bf16Inference, GptClassifierNearFp32) {
  SKIP_WITHOUT_BF16();
  models::GptConfig cfg;
  cfg.vocab_size = 1000, cfg.n_positions = 64, cfg.n_embd = 256, cfg.n_layer = 3, cfg.n_head = 4;
  Generator g(15);
  auto body = std::make_shared<models::Gpt>(cfg, g);
  models::GptClassifier m(body, 3, g);
  m.eval();
  Tensor ids = random_ids(g, 4, 20, 0, 1000);
  Tensor pad = Tensor::zeros({4, 20}, DType::u8);
  Tensor at = Tensor::from_vector(std::vector<int64_t>{19, 19, 19, 19}, {4});
  // Measured 7.2e-3 (class logits (4, 3)).
  EXPECT_LT(fp32_vs_bf16("gpt classifier", [&] { return m.forward(ids, pad, at); }), 1.1e-2);
}

// Through tasks::Translator: the first bf16 call converts every weight once; later calls convert
// none; a weight written in place (Storage version bumped) is converted again, alone, and the
// result follows it; fp32 calls never touch the bf16 forms.
TEST(Bf16Inference, TranslatorConvertsOnceAndAgainAfterAWeightChanges) {
  SKIP_WITHOUT_BF16();
  Generator g(16);
  io::Seq2SeqBundle bundle;
  const models::TransformerConfig cfg = qkv::testing::decode_bench_transformer(3, 1000);
  bundle.config = {{"model_type", "transformer"}, {"model", cfg}};
  auto model = std::make_shared<models::Transformer>(cfg, g);
  bundle.model = model;
  model->eval();
  const tasks::Translator t(bundle);
  std::vector<std::vector<int64_t>> src;
  for (int i = 0; i < 6; ++i) {
    Tensor ids = random_ids(g, 1, 8 + i, 3, 1000);
    src.emplace_back(ids.data<int64_t>(), ids.data<int64_t>() + ids.numel());
    src.back().push_back(cfg.eos_id);
  }
  tasks::TranslateOptions o;
  o.precision = MatmulPrecision::bf16;
  o.search.max_len_ratio = 0, o.search.max_len_extra = 10;

  const int64_t c0 = kernels::bf16_weights_packed();
  auto first = t.translate_ids(src, o);
  const int64_t c1 = kernels::bf16_weights_packed();
  // 3 encoder layers x (qkv, out, fc1, fc2) + 3 decoder layers x (qkv, out, cross q, k, v, out,
  // fc1, fc2) + the output layer = 12 + 24 + 1.
  EXPECT_EQ(c1 - c0, 37);
  auto second = t.translate_ids(src, o);
  EXPECT_EQ(kernels::bf16_weights_packed(), c1) << "a second call converted weights again";
  for (size_t i = 0; i < src.size(); ++i) EXPECT_EQ(first[i][0].tokens, second[i][0].tokens);

  tasks::TranslateOptions f32 = o;
  f32.precision = MatmulPrecision::fp32;
  t.translate_ids(src, f32);
  EXPECT_EQ(kernels::bf16_weights_packed(), c1) << "an fp32 call converted weights";

  // Make one output token win everywhere: only the output layer's bias changes; bf16 must see it.
  const int64_t winner = 7;
  model->generator->bias.data<float>()[winner] = 1e4f;
  model->generator->bias.mark_modified();
  auto third = t.translate_ids(src, o);
  EXPECT_EQ(kernels::bf16_weights_packed() - c1, 1) << "only the changed layer is converted again";
  for (size_t i = 0; i < src.size(); ++i) {
    ASSERT_FALSE(third[i][0].tokens.empty());
    for (int64_t tok : third[i][0].tokens) EXPECT_EQ(tok, winner) << "decoded with the old weights";
  }
}

// On a CPU without AMX / AVX512_BF16 (here: oneDNN capped to AVX2 in a child process) bf16 is an
// error naming the task, the ISA and the fix, before anything runs: never a silent slowdown.
[[noreturn]] void translate_bf16_with_avx2_cap() {
  setenv("ONEDNN_MAX_CPU_ISA", "AVX2", 1);
  if (kernels::dnnl_cpu_info().isa != "avx2") _exit(2);
  models::TransformerConfig cfg = qkv::testing::decode_bench_transformer(3, 1000);
  cfg.d_model = 16, cfg.heads = 2, cfg.d_ff = 32, cfg.enc_layers = cfg.dec_layers = 1;
  io::Seq2SeqBundle bundle;
  bundle.config = {{"model_type", "transformer"}, {"model", cfg}};
  bundle.model = std::make_shared<models::Transformer>(cfg);
  const tasks::Translator t(bundle);
  tasks::TranslateOptions o;
  o.precision = MatmulPrecision::bf16;
  try {
    t.translate_ids({{5, 6, 7, cfg.eos_id}}, o);
  } catch (const Error& e) {
    fprintf(stderr, "%s\n", e.what());
    _exit(3);
  }
  _exit(0);
}

TEST(Bf16InferenceDeathTest, CappedIsaIsRefusedByTheTasks) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(translate_bf16_with_avx2_cap(), ::testing::ExitedWithCode(3),
              "translate \\(precision bf16\\): bf16 needs AMX or AVX512_BF16.*'avx2'.*Use precision fp32");
}
