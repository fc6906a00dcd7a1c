// Weights held in bf16 from the load (io::load_gpt2 / load_bert / load_gpt2_classifier /
// load_seq2seq with precision bf16): each weight is rounded as it is read into a model that holds its weights in
// bf16 from the start. The reference is the same directory loaded in f32 and then held
// (nn::Module::hold_weights_in_bf16, itself checked against its f32 twin in
// test_bf16_held_weights.cpp): every tensor has the same dtype and bits, the query, key and value
// weights lie one after another as hold_weights_in_bf16 lays them, and the forward gives the same
// bits. And the point of it: the process never holds the f32 weights (its peak RSS while loading
// stays well under their size).
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "qkv/autograd/node.h"
#include "qkv/io/bert.h"
#include "qkv/io/gpt2.h"
#include "qkv/io/gpt2_cls.h"
#include "qkv/io/model_dir.h"
#include "qkv/models/transformer.h"
#include "qkv/kernels/bf16.h"
#include "qkv/tensor/rng.h"
#include "qkv/tensor/storage.h"
#include "qkv/text/char_word.h"
#include "qkv/text/finetune_tokens.h"
#include "qkv/util/buffer.h"
#include "peak_rss.h"
#include "precision_compare.h"
#include "ref.h"
#include "scratch_util.h"
#include "tiny_models.h"

using namespace qkv;
using kernels::MatmulPrecision;
using qkv::testing::bit_equal;
using qkv::testing::reset_peak_rss;
using qkv::testing::status_kib;
using qkv::testing::random_ids;

namespace {

// A directory under the temporary one, removed with the object.
struct HeldAtLoadScratch : qkv_test::ScopedTempDir {
  explicit HeldAtLoadScratch(const std::string& name) : ScopedTempDir("held_at_load", name) {}
};

// Same names, dtypes and bits; a held weight is bf16 in both.
void expect_same_state(const nn::Module& at_load, const nn::Module& after) {
  const auto a = at_load.state_dict(), b = after.state_dict();
  ASSERT_EQ(a.size(), b.size());
  int64_t held = 0;
  for (auto& [name, t] : b) {
    ASSERT_TRUE(a.count(name)) << name;
    EXPECT_EQ(a.at(name).dtype(), t.dtype()) << name;
    EXPECT_TRUE(bit_equal(a.at(name), t)) << name;
    held += t.dtype() == DType::bf16;
  }
  EXPECT_GT(held, 0) << "the weights should be held in bf16";
}

template <typename F, typename G>
void expect_at_load_equals_after(const char* what, F at_load, G after) {
  NoGradGuard ng;
  kernels::MatmulPrecisionScope bf16(MatmulPrecision::bf16);
  EXPECT_TRUE(bit_equal(at_load(), after())) << what;
}

models::GptConfig gpt_of_width(int64_t d) {
  models::GptConfig cfg;
  cfg.vocab_size = 2048, cfg.n_positions = 64, cfg.n_embd = d, cfg.n_layer = 1, cfg.n_head = 4;
  return cfg;
}

}  // namespace

TEST(Bf16HeldAtLoad, Gpt2EqualsTheModelHeldAfterLoading) {
  SKIP_WITHOUT_BF16();
  io::GptBundle b;
  Generator g(41);
  b.config = gpt_of_width(64);
  b.model = std::make_shared<models::Gpt>(b.config, g);
  const HeldAtLoadScratch scratch("gpt2");
  const std::string& dir = scratch.dir;
  io::save_gpt2(dir, b);
  io::GptBundle at_load = io::load_gpt2(dir, MatmulPrecision::bf16), after = io::load_gpt2(dir);
  after.model->hold_weights_in_bf16();
  expect_same_state(*at_load.model, *after.model);
  const auto& attn = (*at_load.model->decoder->layers)[0].self_attn;
  EXPECT_EQ(attn->k_proj->weight.storage(), attn->q_proj->weight.storage());
  EXPECT_EQ(attn->v_proj->weight.offset(), 2 * attn->q_proj->weight.numel());
  const Tensor ids = random_ids(g, 2, 9, 0, 2048);
  at_load.model->eval(), after.model->eval();
  expect_at_load_equals_after("gpt-2 logits", [&] { return at_load.model->forward(ids); },
                              [&] { return after.model->forward(ids); });
  // fp32 keeps f32 weights (int8 holds them in int8: test_int8_held_weights.cpp).
  for (auto& [name, t] : io::load_gpt2(dir, MatmulPrecision::fp32).model->state_dict())
    EXPECT_EQ(t.dtype(), DType::f32) << name;
}

TEST(Bf16HeldAtLoad, BertWithItsHeadsAndATaskHeadEqualsTheModelHeldAfterLoading) {
  SKIP_WITHOUT_BF16();
  models::BertConfig cfg;
  cfg.vocab_size = 500, cfg.hidden_size = 64, cfg.num_hidden_layers = 2, cfg.num_attention_heads = 4;
  cfg.intermediate_size = 128, cfg.max_position_embeddings = 64;
  Generator g(42);
  const HeldAtLoadScratch scratch("bert");
  const std::string& dir = scratch.dir;
  io::save_bert(dir, io::make_bert(cfg, {}, g));  // no classifier.* stored: the task head is kept as given
  auto head = [] {
    Generator hg(43);
    auto h = std::make_shared<nn::Linear>(64, 3, true, nn::init::Scheme::none);
    nn::initialize(*h, nn::init::Scheme::normal_002, hg);
    return h;
  };
  io::BertBundle at_load = io::load_bert(dir, {}, {{"classifier", head()}}, MatmulPrecision::bf16);
  io::BertBundle after = io::load_bert(dir, {}, {{"classifier", head()}});
  after.bert->hold_weights_in_bf16(), after.mlm->hold_weights_in_bf16(), after.nsp->hold_weights_in_bf16();
  after.task_heads[0].second->hold_weights_in_bf16();
  expect_same_state(*at_load.bert, *after.bert);
  expect_same_state(*at_load.mlm, *after.mlm);
  expect_same_state(*at_load.nsp, *after.nsp);
  expect_same_state(*at_load.task_heads[0].second, *after.task_heads[0].second);
  EXPECT_EQ(at_load.report.loaded, after.report.loaded);
  EXPECT_EQ(at_load.report.initialised, after.report.initialised);
  const Tensor ids = random_ids(g, 2, 20, 5, 500), types = Tensor::zeros({2, 20}, DType::i64);
  at_load.bert->eval(), after.bert->eval();
  expect_at_load_equals_after("bert hidden", [&] { return at_load.bert->hidden(ids, types); },
                              [&] { return after.bert->hidden(ids, types); });
}

TEST(Bf16HeldAtLoad, GptClassifierEqualsTheModelHeldAfterLoading) {
  SKIP_WITHOUT_BF16();
  io::GptClassifierBundle b;
  std::vector<std::string> vocab = {"<unk>", " "};
  for (char c = 'a'; c < 'a' + 18; ++c) vocab.push_back(std::string(1, c));
  b.tokenizer = std::make_shared<text::VocabTokenizer>(text::VocabTokenizer::Level::Char, vocab, "<unk>");
  text::add_finetune_tokens(*b.tokenizer);
  Generator g(44);
  models::GptConfig cfg = gpt_of_width(64);
  cfg.vocab_size = b.tokenizer->vocab_size();
  b.model = std::make_shared<models::GptClassifier>(std::make_shared<models::Gpt>(cfg, g), 3, g);
  b.labels = {"a", "b", "c"};
  const HeldAtLoadScratch scratch("gpt_cls");
  const std::string& dir = scratch.dir;
  io::save_gpt2_classifier(dir, b);
  io::GptClassifierBundle at_load = io::load_gpt2_classifier(dir, MatmulPrecision::bf16);
  io::GptClassifierBundle after = io::load_gpt2_classifier(dir);
  after.model->hold_weights_in_bf16();
  expect_same_state(*at_load.model, *after.model);
  EXPECT_EQ(at_load.model->score->weight.dtype(), DType::bf16);
}

TEST(Bf16HeldAtLoad, TranslationTransformerEqualsTheModelHeldAfterLoading) {
  SKIP_WITHOUT_BF16();
  for (const char* positional : {"sinusoidal", "learned", "relative"}) {
    SCOPED_TRACE(positional);
    const HeldAtLoadScratch scratch(std::string("mt_") + positional);
    const std::string& dir = scratch.dir;
    io::save_seq2seq(dir, qkv_test::tiny_translation_model(46, 16, positional));
    io::Seq2SeqBundle at_load = io::load_seq2seq(dir, MatmulPrecision::bf16), after = io::load_seq2seq(dir);
    dynamic_cast<models::Transformer&>(*after.model).hold_weights_in_bf16();
    expect_same_state(*at_load.model, *after.model);
    Generator g(47);
    const Tensor src = random_ids(g, 2, 7, 4, at_load.src_tok->vocab_size());
    const Tensor tgt = random_ids(g, 2, 5, 4, at_load.src_tok->vocab_size());
    const Tensor pad = Tensor::zeros({2, 7}, DType::u8);
    at_load.model->eval(), after.model->eval();
    expect_at_load_equals_after("transformer logits", [&] { return at_load.model->forward(src, pad, tgt); },
                                [&] { return after.model->forward(src, pad, tgt); });
  }
}

// GPT-2's widths, four layers: every weight is at least 2 MiB in f32, the size from which a model
// built to be loaded takes pages that are not touched until written (Storage::allocate_zeroed).
TEST(Bf16HeldAtLoad, ThePeakWhileLoadingStaysWellUnderTheF32Weights) {
  SKIP_WITHOUT_BF16();
  if (kBufferAsan) GTEST_SKIP() << "under AddressSanitizer every buffer is zero-filled";
  const HeldAtLoadScratch scratch("gpt2_768");
  const std::string& dir = scratch.dir;
  int64_t f32_bytes = 0;
  {
    io::GptBundle b;
    Generator g(45);
    b.config = gpt_of_width(768);
    b.config.n_layer = 4;
    b.model = std::make_shared<models::Gpt>(b.config, g);
    for (auto& [name, t] : b.model->named_parameters()) f32_bytes += t.ndim() == 2 ? t.numel() * 4 : 0;
    io::save_gpt2(dir, b);
  }
  allocator_empty_cache();
  if (!reset_peak_rss()) GTEST_SKIP() << "/proc/self/clear_refs is not writable here";
  const int64_t before = status_kib("VmRSS:");
  ASSERT_GT(before, 0) << "no VmRSS in /proc/self/status";
  io::GptBundle held = io::load_gpt2(dir, MatmulPrecision::bf16);
  const int64_t peak = status_kib("VmHWM:") - before;
  ASSERT_GT(f32_bytes, 100 << 20);
  // bf16: half of f32_bytes, plus one layer's f32 temporaries (the Conv1D weights are stored (in,
  // out) and transposed as read: 19 MB for the FFN's two), biases, norms and the 1 MiB read
  // buffer. Loading the f32 weights first peaks above all of them.
  EXPECT_LT(peak * 1024, f32_bytes * 4 / 5) << "peak " << peak << " KiB while loading " << f32_bytes
                                            << " bytes of f32 weights into bf16";
  EXPECT_EQ(held.model->decoder->layers->size(), 4u);
}
