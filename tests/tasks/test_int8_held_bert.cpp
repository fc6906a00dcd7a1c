// BERT with its weights held in int8 (nn::Module::hold_weights_in_int8; io::load_bert at precision
// int8, what `qkv embed` and `qkv classify` do). References as in test_int8_held_weights.cpp: on
// exactly quantizable weights the held model equals its f32 twin at int8 bit for bit (hidden
// states, the tied MLM decoder, NSP; batch products through oneDNN over the held rows), and a
// directory loaded at int8 equals the same directory loaded in f32 and then held.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "qkv/io/bert.h"
#include "qkv/models/bert.h"
#include "qkv/nn/init.h"
#include "qkv/nn/layers.h"
#include "qkv/tensor/rng.h"
#include "int8_held_compare.h"
#include "int8_threshold.h"
#include "precision_compare.h"
#include "ref.h"
#include "scratch_util.h"

using namespace qkv;
using namespace qkv::testing::int8_held;
using kernels::MatmulPrecision;
using qkv::testing::bit_equal;
using qkv::testing::Int8Threshold;
using qkv::testing::random_ids;

namespace {

models::BertConfig bert_config() {
  models::BertConfig cfg;
  cfg.vocab_size = 1000, cfg.hidden_size = 256, cfg.num_hidden_layers = 2, cfg.num_attention_heads = 4;
  cfg.intermediate_size = 1024, cfg.max_position_embeddings = 128;
  return cfg;
}

models::BertForPreTraining pretraining(const models::BertConfig& cfg, Generator& gen) {  // decoder tied to E_word
  auto bert = std::make_shared<models::Bert>(cfg, gen);
  return models::BertForPreTraining(
      bert, std::make_shared<models::BertMlmHead>(cfg, bert->embeddings->word_embeddings->weight, gen),
      std::make_shared<models::BertNspHead>(cfg, gen));
}

}  // namespace

TEST(Int8HeldWeights, BertWithItsHeadsEqualsItsTwinOnExactlyRepresentableWeights) {
  SKIP_WITHOUT_INT8();
  Int8Threshold all(0);
  Generator g1(61), g2(61), g(7);
  models::BertForPreTraining held = pretraining(bert_config(), g1), twin = pretraining(bert_config(), g2);
  make_exactly_quantizable(held, 8), make_exactly_quantizable(twin, 8);
  held.eval(), twin.eval();
  held.hold_weights_in_int8();
  expect_held_twin(held, twin);
  EXPECT_EQ(held.mlm->decoder_weight.dtype(), DType::i8) << "the tied decoder follows its table";
  const Tensor ids = random_ids(g, 3, 40, 1, 1000), types = Tensor::zeros({3, 40}, DType::i64);
  const Tensor key_pad = Tensor::zeros({3, 40}, DType::u8);
  expect_same_bits_in_int8("bert hidden", [&] { return held.bert->hidden(ids, types); },
                           [&] { return twin.bert->hidden(ids, types); });
  expect_same_bits_in_int8("bert mlm logits", [&] { return held.forward(ids, types, key_pad).mlm; },
                           [&] { return twin.forward(ids, types, key_pad).mlm; });
  expect_same_bits_in_int8("bert nsp logits", [&] { return held.forward(ids, types, key_pad).nsp; },
                           [&] { return twin.forward(ids, types, key_pad).nsp; });
}

TEST(Int8HeldAtLoad, BertWithItsHeadsAndATaskHeadEqualsTheModelHeldAfterLoading) {
  SKIP_WITHOUT_INT8();
  Int8Threshold all(0);
  models::BertConfig cfg = bert_config();
  cfg.hidden_size = 64, cfg.intermediate_size = 128;
  Generator g(62);
  const qkv_test::ScopedTempDir scratch("int8_held", "bert");
  io::save_bert(scratch.dir, io::make_bert(cfg, {}, g));  // no classifier.* stored: the task head is kept as given
  auto head = [] {
    Generator hg(63);
    auto h = std::make_shared<nn::Linear>(64, 3, true, nn::init::Scheme::none);
    nn::initialize(*h, nn::init::Scheme::normal_002, hg);
    return h;
  };
  io::BertBundle at_load = io::load_bert(scratch.dir, {}, {{"classifier", head()}}, MatmulPrecision::int8);
  io::BertBundle after = io::load_bert(scratch.dir, {}, {{"classifier", head()}});
  after.bert->hold_weights_in_int8(), after.mlm->hold_weights_in_int8(), after.nsp->hold_weights_in_int8();
  after.task_heads[0].second->hold_weights_in_int8();
  const std::pair<const nn::Module*, const nn::Module*> pairs[] = {
      {at_load.bert.get(), after.bert.get()},
      {at_load.mlm.get(), after.mlm.get()},
      {at_load.nsp.get(), after.nsp.get()},
      {at_load.task_heads[0].second.get(), after.task_heads[0].second.get()}};
  int64_t held = 0;
  for (auto [x, y] : pairs) {
    const auto a = x->state_dict(), b = y->state_dict();
    ASSERT_EQ(a.size(), b.size());
    for (auto& [name, t] : b) {
      ASSERT_EQ(a.at(name).dtype(), t.dtype()) << name;
      if (t.dtype() == DType::i8) expect_same_held(a.at(name), t, name), ++held;
      else EXPECT_TRUE(bit_equal(a.at(name), t)) << name;
    }
  }
  EXPECT_GT(held, 10) << "every matrix pays at threshold 0";
  EXPECT_EQ(at_load.report.loaded, after.report.loaded);
  const Tensor ids = random_ids(g, 2, 20, 5, 500), types = Tensor::zeros({2, 20}, DType::i64);
  at_load.bert->eval(), after.bert->eval();
  expect_same_bits_in_int8("bert hidden", [&] { return at_load.bert->hidden(ids, types); },
                           [&] { return after.bert->hidden(ids, types); });
}
