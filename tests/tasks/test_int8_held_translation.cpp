// Translation models held in int8 (models::Transformer::hold_weights_in_int8_blocked, what
// load_seq2seq and the commands do at --precision int8): the held rows stay with the model and the
// products read oneDNN's blocked copy of them, built from the rows without f32 values. On weights
// that quantize exactly the held model equals its f32 twin at int8 bit for bit (the twin packs
// its f32 weights into the same blocked form), through forward, greedy and beam search; loading
// at int8 equals loading in f32 and then holding.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "decode_bench_shapes.h"
#include "int8_held_compare.h"
#include "int8_threshold.h"
#include "precision_compare.h"
#include "qkv/io/model_dir.h"
#include "qkv/kernels/int8.h"
#include "qkv/models/transformer.h"
#include "qkv/models/transformer_blocks.h"
#include "qkv/tasks/translator.h"
#include "qkv/tensor/held_int8.h"
#include "qkv/tensor/rng.h"
#include "ref.h"
#include "scratch_util.h"
#include "tiny_models.h"

using namespace qkv;
using namespace qkv::testing::int8_held;
using kernels::MatmulPrecision;
using qkv::testing::Int8Threshold;
using qkv::testing::random_ids;

namespace {

// Whether a Linear's int8 products of a batch read the plain rows (else oneDNN's blocked form).
bool reads_rows(const nn::Linear& l) {
  const kernels::MatmulPrecisionScope int8(MatmulPrecision::int8);
  const auto p = l.packed();
  EXPECT_TRUE(p && p->int8) << "no int8 form";
  return p && p->int8 && kernels::int8_weight_in_rows(*p->int8);
}

// Whether a held Linear's pack keeps its held rows for products of fewer rows (beside the blocked form).
bool keeps_held_rows(const nn::Linear& l) {
  const kernels::MatmulPrecisionScope int8(MatmulPrecision::int8);
  const auto p = l.packed();
  return p && p->int8_rows && kernels::int8_weight_in_rows(*p->int8_rows) &&
         kernels::int8_weight_rows(*p->int8_rows) == l.weight.size(0);
}

}  // namespace

TEST(Int8HeldTranslation, TransformerEqualsItsTwinOnExactlyRepresentableWeights) {
  SKIP_WITHOUT_INT8();
  Int8Threshold all(0);
  const models::TransformerConfig cfg = qkv::testing::decode_bench_transformer(2, 1000);
  Generator g1(61), g2(61);
  auto held = std::make_shared<models::Transformer>(cfg, g1), twin = std::make_shared<models::Transformer>(cfg, g2);
  make_exactly_quantizable(*held, 7), make_exactly_quantizable(*twin, 7);
  held->eval(), twin->eval();
  held->hold_weights_in_int8_blocked();
  expect_held_twin(*held, *twin);
  const auto& layer = (*held->encoder->layers)[0];
  // Without oneDNN's exact kernels (no VNNI) every batch reads the rows: there is no blocked form.
  const bool rows_only = !kernels::int8_native();
  EXPECT_EQ(reads_rows(*layer.ffn->fc1), rows_only) << "the held model multiplies oneDNN's blocked copy";
  EXPECT_EQ(reads_rows(*(*twin->encoder->layers)[0].ffn->fc1), rows_only) << "and so does its twin";
  EXPECT_TRUE(keeps_held_rows(*layer.ffn->fc1)) << "1-3 rows read the held rows";

  Generator g(8);
  const Tensor src = random_ids(g, 4, 20, 4, 1000), tgt = random_ids(g, 4, 15, 4, 1000);
  const Tensor pad = Tensor::zeros({4, 20}, DType::u8);
  expect_same_bits_in_int8("transformer logits", [&] { return held->forward(src, pad, tgt); },
                           [&] { return twin->forward(src, pad, tgt); });

  io::Seq2SeqBundle hb, tb;
  hb.config = tb.config = {{"model_type", "transformer"}, {"model", cfg}};
  hb.model = held, tb.model = twin;
  const tasks::Translator th(hb), tt(tb);
  const auto sources = qkv::testing::random_sources(g, 6, 6, 1, 4, cfg.src_vocab, cfg.eos_id);
  tasks::TranslateOptions o;
  o.precision = MatmulPrecision::int8;
  o.search.max_len_ratio = 0, o.search.max_len_extra = 12;
  for (auto [beam, batch] : {std::pair{1, 32}, {4, 32}, {1, 1}, {2, 1}}) {  // steps of 6, 24, 1 and 2 rows
    o.search.beam = beam, o.batch_size = batch;
    SCOPED_TRACE("beam " + std::to_string(beam) + ", batch " + std::to_string(batch));
    const int64_t before = kernels::int8_weights_packed();
    const auto a = th.translate_ids(sources, o);
    EXPECT_EQ(kernels::int8_weights_packed(), before) << "the held rows were quantized again";
    const auto b = tt.translate_ids(sources, o);
    for (size_t i = 0; i < sources.size(); ++i) {
      EXPECT_EQ(a[i][0].tokens, b[i][0].tokens) << "sentence " << i;
      EXPECT_EQ(a[i][0].score, b[i][0].score) << "sentence " << i;
    }
  }
  // The held rows read in place give the same bits (the int32 sums are exact in both forms).
  held->set_pack_layout(kernels::PackLayout::rows, MatmulPrecision::int8);
  EXPECT_TRUE(reads_rows(*layer.ffn->fc1));
  expect_same_bits_in_int8("transformer logits, held rows in place", [&] { return held->forward(src, pad, tgt); },
                           [&] { return twin->forward(src, pad, tgt); });

  tasks::TranslateOptions f32 = o;
  f32.precision = MatmulPrecision::fp32;
  qkv::testing::expect_refused_at_fp32([&] { th.translate_ids(sources, f32); }, "int8");
}

// Other models keep reading their held rows in place (hold_weights_in_int8 sets the rows layout).
TEST(Int8HeldTranslation, HoldingAloneReadsTheRowsInPlace) {
  SKIP_WITHOUT_INT8();
  Int8Threshold all(0);
  Generator g1(62);
  models::Transformer m(qkv::testing::decode_bench_transformer(2, 1000), g1);
  m.eval();
  m.hold_weights_in_int8();
  EXPECT_TRUE(reads_rows(*(*m.encoder->layers)[0].ffn->fc1));
}

TEST(Int8HeldTranslation, LoadingAtInt8EqualsHoldingAfterLoading) {
  SKIP_WITHOUT_INT8();
  Int8Threshold all(0);
  for (const char* positional : {"sinusoidal", "learned", "relative"}) {
    SCOPED_TRACE(positional);
    const qkv_test::ScopedTempDir scratch("held_translation", positional);
    io::save_seq2seq(scratch.dir, qkv_test::tiny_translation_model(63, 16, positional));
    io::Seq2SeqBundle at_load = io::load_seq2seq(scratch.dir, MatmulPrecision::int8);
    tasks::Translator tb(io::load_seq2seq(scratch.dir));
    tb.hold_weights_in_int8();
    const auto a = at_load.model->state_dict(), b = tb.bundle().model->state_dict();
    ASSERT_EQ(a.size(), b.size());
    int held = 0;
    for (const auto& [name, t] : a) {
      ASSERT_TRUE(b.count(name)) << name;
      ASSERT_EQ(t.dtype(), b.at(name).dtype()) << name;
      if (is_held_int8(t)) {
        expect_same_held(t, b.at(name), name);
        ++held;
      } else {
        EXPECT_TRUE(qkv::testing::bit_equal(t, b.at(name))) << name;
      }
    }
    EXPECT_GT(held, 0);
    const tasks::Translator ta(std::move(at_load));
    Generator g(64);
    const int64_t vocab = ta.bundle().src_tok->vocab_size();
    const auto sources = qkv::testing::random_sources(g, 3, 6, 1, 4, vocab, /*eos=*/3);
    tasks::TranslateOptions o;
    o.precision = MatmulPrecision::int8;
    o.search.beam = 3;
    const auto x = ta.translate_ids(sources, o), y = tb.translate_ids(sources, o);
    for (size_t i = 0; i < sources.size(); ++i) EXPECT_EQ(x[i][0].tokens, y[i][0].tokens) << "sentence " << i;
  }
}
