// Weights held in bf16 (nn::Module::hold_weights_in_bf16): a model whose Linear weights and
// Embedding tables were replaced by their bf16 rounding gives, at matmul precision bf16, the same
// bits as its twin that keeps f32 weights holding those rounded values, in every product layout
// (panels, rows, the fp32_fma fallback from 256 rows) and through the tasks (translation, GPT
// generation, BERT hidden states and pretraining logits, the GPT classifier); it holds those
// weights in half the bytes; fp32 products against it are refused with an error naming the weight;
// save() writes f32 that loads back to the same values.
//
// The reference is the twin: the f32 model's bf16 inference is itself checked against fp32 and
// PyTorch elsewhere (test_bf16_inference.cpp, the reference tests); here the claim is equality.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "decode_bench_shapes.h"
#include "qkv/autograd/node.h"
#include "qkv/kernels/bf16.h"
#include "qkv/models/bert.h"
#include "qkv/models/gpt.h"
#include "qkv/models/transformer.h"
#include "qkv/ops/shape.h"
#include "qkv/tasks/generator.h"
#include "qkv/tasks/translator.h"
#include "qkv/tensor/rng.h"
#include "precision_compare.h"
#include "ref.h"

using namespace qkv;
using kernels::MatmulPrecision;
using qkv::testing::bit_equal;
using qkv::testing::random_ids;

namespace {

// Holds `held`'s weights in bf16 and writes their values (widened, exact) into the same tensors of
// `twin`, which stays f32. Checks what was converted: every 2-D parameter, nothing else.
void hold_and_round_twin(nn::Module& held, nn::Module& twin) {
  held.hold_weights_in_bf16();
  auto t = twin.state_dict();
  for (auto& [name, w] : held.state_dict()) {
    ASSERT_TRUE(t.count(name)) << name;
    EXPECT_EQ(w.dtype(), w.ndim() == 2 && name.find("relative_") == std::string::npos ? DType::bf16 : DType::f32)
        << name;
    if (w.dtype() != DType::bf16) continue;
    EXPECT_FALSE(w.requires_grad()) << name;
    t[name].copy_from(w);  // the rounded values, in f32
  }
}

template <typename F, typename G>
void expect_held_equals_twin(const char* what, F held, G twin) {
  NoGradGuard ng;
  kernels::MatmulPrecisionScope bf16(MatmulPrecision::bf16);
  const Tensor a = held(), b = twin();
  EXPECT_TRUE(bit_equal(a, b)) << what << ": max-relative difference " << qkv::testing::max_rel(b, a);
}

}  // namespace

TEST(Bf16HeldWeights, TensorsChangeInPlaceForEveryHandle) {
  Generator g(1);
  Tensor a = Tensor::empty({3, 5}), b = Tensor::empty({4, 5}), bias = Tensor::empty({4});
  for (Tensor t : {a, b, bias}) nn::init::normal(t, 0.0, 1.0, g);
  a.set_requires_grad(true);
  const Tensor alias = a;  // a tied handle
  std::vector<float> before = a.to_vector<float>();
  nn::hold_in_bf16({a, b, a, Tensor()});  // a twice (tied): held once; undefined skipped
  EXPECT_EQ(alias.dtype(), DType::bf16);
  EXPECT_FALSE(alias.requires_grad());
  EXPECT_EQ(a.storage(), b.storage()) << "one storage, in order";
  EXPECT_EQ(b.offset(), a.numel());
  EXPECT_EQ(a.storage()->nbytes(), size_t(a.numel() + b.numel()) * 2);
  const Tensor wide = a.to(DType::f32);
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_EQ(wide.data<float>()[i], kernels::from_bf16(kernels::to_bf16(before[i]))) << i;
  EXPECT_EQ(bias.dtype(), DType::f32);
  nn::hold_in_bf16({bias});
  const Tensor bt = transpose(b, 0, 1).contiguous();  // a strided bf16 copy
  EXPECT_TRUE(bit_equal(bt.to(DType::f32), transpose(b.to(DType::f32), 0, 1).contiguous()));
}

TEST(Bf16HeldWeights, TransformerEqualsItsRoundedTwinInPanelsAndRows) {
  SKIP_WITHOUT_BF16();
  Generator g1(21), g2(21);
  const models::TransformerConfig cfg = qkv::testing::decode_bench_transformer(2, 1000);
  models::Transformer held(cfg, g1), twin(cfg, g2);
  held.eval(), twin.eval();
  hold_and_round_twin(held, twin);
  // The query, key and value of a layer lie one after another: the stacked rows pack reads them there.
  const auto& attn = (*held.encoder->layers)[0].self_attn;
  EXPECT_EQ(attn->k_proj->weight.storage(), attn->q_proj->weight.storage());
  EXPECT_EQ(attn->v_proj->weight.offset(), 2 * attn->q_proj->weight.numel());

  Generator g(3);
  const Tensor src = random_ids(g, 4, 20, 3, 1000), tgt = random_ids(g, 4, 15, 3, 1000);
  const Tensor pad = Tensor::zeros({4, 20}, DType::u8);
  expect_held_equals_twin("transformer forward, panels", [&] { return held.forward(src, pad, tgt); },
                          [&] { return twin.forward(src, pad, tgt); });
  // 5 x 60 = 300 rows, under both bf16 product kernels: from 256 rows fp32_fma multiplies the
  // weight widened per call (PackedLinear::original_weight), native the blocked copy.
  const Tensor src_long = random_ids(g, 5, 60, 3, 1000), tgt_long = random_ids(g, 5, 60, 3, 1000);
  const Tensor pad_long = Tensor::zeros({5, 60}, DType::u8);
  const kernels::Bf16Products chosen = kernels::bf16_products();
  for (kernels::Bf16Products p : {kernels::Bf16Products::fp32_fma, kernels::Bf16Products::native}) {
    kernels::set_bf16_products(p);
    expect_held_equals_twin(p == kernels::Bf16Products::native ? "300 rows, native" : "300 rows, fp32_fma",
                            [&] { return held.forward(src_long, pad_long, tgt_long); },
                            [&] { return twin.forward(src_long, pad_long, tgt_long); });
  }
  kernels::set_bf16_products(chosen);
  held.set_pack_layout(kernels::PackLayout::rows), twin.set_pack_layout(kernels::PackLayout::rows);
  expect_held_equals_twin("transformer forward, rows", [&] { return held.forward(src, pad, tgt); },
                          [&] { return twin.forward(src, pad, tgt); });
}

TEST(Bf16HeldWeights, TranslatorDecodesTheTwinsTokens) {
  SKIP_WITHOUT_BF16();
  const models::TransformerConfig cfg = qkv::testing::decode_bench_transformer(2, 1000);
  Generator g1(22), g2(22);
  auto held = std::make_shared<models::Transformer>(cfg, g1), twin = std::make_shared<models::Transformer>(cfg, g2);
  hold_and_round_twin(*held, *twin);
  io::Seq2SeqBundle hb, tb;
  hb.config = tb.config = {{"model_type", "transformer"}, {"model", cfg}};
  hb.model = held, tb.model = twin;
  const tasks::Translator th(hb), tt(tb);
  Generator g(4);
  const auto src = qkv::testing::random_sources(g, 6, 6, 2, 3, 1000, cfg.eos_id);
  tasks::TranslateOptions o;
  o.precision = MatmulPrecision::bf16;
  o.search.max_len_ratio = 0, o.search.max_len_extra = 12;
  for (int beam : {1, 4}) {
    o.search.beam = beam;
    const auto a = th.translate_ids(src, o), b = tt.translate_ids(src, o);
    for (size_t i = 0; i < src.size(); ++i) {
      EXPECT_EQ(a[i][0].tokens, b[i][0].tokens) << "beam " << beam << ", sentence " << i;
      EXPECT_EQ(a[i][0].score, b[i][0].score) << "beam " << beam << ", sentence " << i;
    }
  }
  tasks::TranslateOptions f32 = o;
  f32.precision = MatmulPrecision::fp32;
  qkv::testing::expect_refused_at_fp32([&] { th.translate_ids(src, f32); }, "bf16");
}

TEST(Bf16HeldWeights, GptGeneratesTheTwinsTokensReadingTheHeldRowsInPlace) {
  SKIP_WITHOUT_BF16();
  Generator g1(23), g2(23);
  io::GptBundle hb, tb;
  hb.config = tb.config = qkv::testing::decode_bench_gpt(3);
  hb.model = std::make_shared<models::Gpt>(qkv::testing::decode_bench_gpt(3), g1);
  tb.model = std::make_shared<models::Gpt>(qkv::testing::decode_bench_gpt(3), g2);
  hold_and_round_twin(*hb.model, *tb.model);
  const tasks::Generator gh(hb, -1, -1), gt(tb, -1, -1);  // bf16 decodes in the rows layout
  Generator g(5);
  const std::vector<std::vector<int64_t>> prompts = qkv::testing::random_prompts(g, 4, 3, 4, 1000);
  tasks::GenerateOptions o;
  o.precision = MatmulPrecision::bf16;
  o.max_new_tokens = 12;
  o.batch_size = 4;
  for (bool sample : {false, true}) {
    o.sample = sample;
    o.seed = 9;
    o.logits = {0.9, 20, 0.95, 1.1};
    const int64_t copies = kernels::bf16_weights_packed();
    const auto a = gh.generate_ids(prompts, o);
    // Every weight is read where it is held: the rows pack converts and copies nothing.
    EXPECT_EQ(kernels::bf16_weights_packed(), copies) << "a rows pack copied weights held in bf16";
    const auto b = gt.generate_ids(prompts, o);
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(a[i].tokens, b[i].tokens) << "sample " << sample << ", " << i;
  }
  const Tensor ids = random_ids(g, 2, 9, 0, 1000);
  expect_held_equals_twin("gpt forward (tied head, rows)", [&] { return hb.model->forward(ids); },
                          [&] { return tb.model->forward(ids); });
}

TEST(Bf16HeldWeights, BertWithItsHeadsAndTheGptClassifierEqualTheirTwins) {
  SKIP_WITHOUT_BF16();
  models::BertConfig cfg;
  cfg.vocab_size = 1000, cfg.hidden_size = 256, cfg.num_hidden_layers = 2, cfg.num_attention_heads = 4;
  cfg.intermediate_size = 1024, cfg.max_position_embeddings = 128;
  Generator g1(24), g2(24), g(6);
  auto pretraining = [&cfg](Generator& gen) {  // the MLM decoder is tied to the word table
    auto bert = std::make_shared<models::Bert>(cfg, gen);
    return models::BertForPreTraining(
        bert, std::make_shared<models::BertMlmHead>(cfg, bert->embeddings->word_embeddings->weight, gen),
        std::make_shared<models::BertNspHead>(cfg, gen));
  };
  models::BertForPreTraining held = pretraining(g1), twin = pretraining(g2);
  held.eval(), twin.eval();
  hold_and_round_twin(held, twin);
  EXPECT_EQ(held.mlm->decoder_weight.dtype(), DType::bf16) << "the tied decoder follows its table";
  const Tensor ids = random_ids(g, 3, 100, 1, 1000);  // 300 rows
  const Tensor types = Tensor::zeros({3, 100}, DType::i64);
  expect_held_equals_twin("bert hidden", [&] { return held.bert->hidden(ids, types); },
                          [&] { return twin.bert->hidden(ids, types); });
  const Tensor key_pad = Tensor::zeros({3, 100}, DType::u8);
  expect_held_equals_twin("bert mlm logits", [&] { return held.forward(ids, types, key_pad).mlm; },
                          [&] { return twin.forward(ids, types, key_pad).mlm; });
  expect_held_equals_twin("bert nsp logits", [&] { return held.forward(ids, types, key_pad).nsp; },
                          [&] { return twin.forward(ids, types, key_pad).nsp; });

  Generator g3(25), g4(25);
  models::GptClassifier ch(std::make_shared<models::Gpt>(qkv::testing::decode_bench_gpt(3), g3), 3, g3);
  models::GptClassifier ct(std::make_shared<models::Gpt>(qkv::testing::decode_bench_gpt(3), g4), 3, g4);
  ch.eval(), ct.eval();
  hold_and_round_twin(ch, ct);
  const Tensor cids = random_ids(g, 4, 20, 0, 1000), pad = Tensor::zeros({4, 20}, DType::u8);
  const Tensor at = Tensor::from_vector(std::vector<int64_t>{19, 12, 19, 5}, {4});
  expect_held_equals_twin("gpt classifier", [&] { return ch.forward(cids, pad, at); },
                          [&] { return ct.forward(cids, pad, at); });
}

TEST(Bf16HeldWeights, HalfTheBytesAndSavedAsF32) {
  Generator g1(26), g2(26);
  models::Gpt held(qkv::testing::decode_bench_gpt(3), g1), twin(qkv::testing::decode_bench_gpt(3), g2);
  auto bytes = [](const nn::Module& m) {
    int64_t n = 0;
    for (auto& [name, t] : m.named_parameters()) n += t.numel() * int64_t(dtype_size(t.dtype()));
    return n;
  };
  const int64_t f32_bytes = bytes(held);
  hold_and_round_twin(held, twin);
  int64_t matrices = 0;
  for (auto& [name, t] : twin.named_parameters()) matrices += t.ndim() == 2 ? t.numel() : 0;
  EXPECT_EQ(bytes(held), f32_bytes - 2 * matrices);
  EXPECT_GT(2 * matrices, f32_bytes * 4 / 10) << "the matrices are most of a GPT's bytes";

  const std::string path = (std::filesystem::temp_directory_path() / "qkv_bf16_held.safetensors").string();
  held.save(path);  // widened to f32
  Generator g3(27);
  models::Gpt loaded(qkv::testing::decode_bench_gpt(3), g3);
  loaded.load(path);
  std::filesystem::remove(path);
  const auto t = twin.state_dict();
  for (auto& [name, w] : loaded.state_dict()) {
    EXPECT_EQ(w.dtype(), DType::f32) << name;
    EXPECT_TRUE(bit_equal(w, t.at(name))) << name;
  }
  // Gradients cannot flow into weights held in bf16: a recorded product is refused.
  Tensor x = Tensor::zeros({1, 256});
  x.set_requires_grad(true);
  kernels::MatmulPrecisionScope bf16(MatmulPrecision::bf16);
  EXPECT_THROW((*held.decoder->layers)[0].ffn->fc1->forward(x), std::exception);
}
