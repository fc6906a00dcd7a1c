// The encoder-decoder Transformer against embeddings + torch.nn.Transformer + generator
// (tools/refs/models_transformer.py, cases model_*): logits, loss, every parameter gradient,
// cross-attention maps; incremental decoding (start/step/select_rows) against the same logits;
// config JSON; save/load.
#include "qkv/models/transformer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "qkv/autograd/node.h"
#include "qkv/ops/loss.h"
#include "qkv/ops/shape.h"
#include "logits_at.h"
#include "transformer_ref.h"

using namespace qkv;
using namespace qkv::testing;
using namespace qkv::models;

namespace {

const std::vector<std::string>& kModels = kTransformerRefModels;

}  // namespace

TEST(Transformer, LogitsLossAndAllGradientsMatchTorch) {
  RefFile ref("models_transformer");
  ASSERT_EQ(count_transformer_ref_models(ref), kModels.size());
  size_t ran = 0, relative_tables = 0;
  for (auto& c : kModels) {
    SCOPED_TRACE(c);
    auto m = load_transformer_ref(ref, c);
    Tensor logits = m->forward(ref.get(c, "src"), ref.get(c, "src_pad"), ref.get(c, "tgt_in"));
    EXPECT_CLOSE(logits, ref.get(c, "logits"), scaled_tol(ref.get(c, "logits")));
    const int64_t pad = m->config().pad_id;
    Tensor loss = cross_entropy(logits, ref.get(c, "tgt_out"), pad);
    EXPECT_CLOSE(loss, ref.get(c, "loss"), kF32);
    backward(loss);
    size_t n = 0;
    for (auto& [name, t] : m->named_parameters()) {
      SCOPED_TRACE(name);
      Tensor expected = ref.get(c, "g." + name);
      EXPECT_CLOSE(t.grad(), expected, scaled_tol(expected));
      relative_tables += name.find(".relative_") != std::string::npos;
      ++n;
    }
    size_t expected = 0;
    for (auto& [name, t] : ref.contents().tensors) expected += name.rfind(c + "/g.", 0) == 0;
    EXPECT_EQ(n, expected);
    ++ran;
  }
  EXPECT_EQ(ran, 9u);
  // relative models: 2 tables x (2 + 2 encoder + decoder self-attentions) x 2 models
  EXPECT_EQ(relative_tables, 16u);
}

TEST(Transformer, CrossAttentionMapsMatchTorch) {
  RefFile ref("models_transformer");
  for (auto& c : kModels) {
    SCOPED_TRACE(c);
    auto m = load_transformer_ref(ref, c);
    m->train();  // cross_attention() runs in eval mode and restores the flag
    AttentionMaps maps = m->cross_attention(ref.get(c, "src"), ref.get(c, "src_pad"), ref.get(c, "tgt_in"));
    EXPECT_TRUE(m->is_training());
    ASSERT_EQ(int64_t(maps.layers.size()), m->config().dec_layers);
    for (size_t i = 0; i < maps.layers.size(); ++i)
      EXPECT_CLOSE(maps.layers[i], ref.get(c, "cross_" + std::to_string(i)), kF32);
  }
}

TEST(Transformer, IncrementalDecodingEqualsFullForwardStepByStep) {
  RefFile ref("models_transformer");
  ASSERT_EQ(count_transformer_ref_models(ref), kModels.size());
  size_t steps = 0;
  for (auto& c : kModels) {
    SCOPED_TRACE(c);
    auto m = load_transformer_ref(ref, c);
    Tensor tgt_in = ref.get(c, "tgt_in"), logits = ref.get(c, "logits");  // torch's full forward
    const int64_t B = tgt_in.size(0), T = tgt_in.size(1);
    auto state = m->start(ref.get(c, "src"), ref.get(c, "src_pad"));
    EXPECT_EQ(state->rows(), B);
    std::vector<int64_t> all(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) all[size_t(b)] = b;
    for (int64_t t = 0; t < T; ++t) {
      SCOPED_TRACE(t);
      EXPECT_EQ(state->steps(), t);
      Tensor step_logits = m->step(*state, contiguous(slice(tgt_in, 1, t, t + 1)));  // (B, V)
      EXPECT_FALSE(step_logits.requires_grad());
      EXPECT_CLOSE(step_logits, logits_at(logits, all, t), scaled_tol(logits));
      ++steps;
    }
  }
  EXPECT_EQ(steps, 9u * 6u);  // every model, every target position
}

TEST(Transformer, SelectRowsReordersHypothesesLikeBeamSearch) {
  RefFile ref("models_transformer");
  size_t steps = 0;
  for (auto& c : kModels) {
    SCOPED_TRACE(c);
    auto m = load_transformer_ref(ref, c);
    Tensor tgt_in = ref.get(c, "tgt_in"), logits = ref.get(c, "logits");
    auto state = m->start(ref.get(c, "src"), ref.get(c, "src_pad"));
    for (int64_t t = 0; t < 2; ++t) m->step(*state, contiguous(slice(tgt_in, 1, t, t + 1)));
    // Expand to 5 hypotheses drawn from the 3 sentences (with repeats), then reorder again later.
    std::vector<int64_t> rows = {2, 0, 2, 1, 0};
    state->select_rows(rows);
    EXPECT_EQ(state->rows(), 5);
    Tensor idx = Tensor::from_vector<int64_t>(rows, {5});
    Tensor tgt_rows = index_select(tgt_in, 0, idx);
    for (int64_t t = 2; t < tgt_in.size(1); ++t) {
      SCOPED_TRACE(t);
      if (t == 4) {  // a second reordering of the current hypotheses
        std::vector<int64_t> again = {4, 4, 1, 0, 3};
        state->select_rows(again);
        std::vector<int64_t> composed;
        for (int64_t r : again) composed.push_back(rows[size_t(r)]);
        rows = composed;
        tgt_rows = index_select(tgt_in, 0, Tensor::from_vector<int64_t>(rows, {5}));
      }
      Tensor out = m->step(*state, contiguous(slice(tgt_rows, 1, t, t + 1)));
      EXPECT_CLOSE(out, logits_at(logits, rows, t), scaled_tol(logits));
      ++steps;
    }
    EXPECT_THROW(state->select_rows({7}), Error);
  }
  EXPECT_EQ(steps, 9u * 4u);
}

TEST(Transformer, ConfigJsonRoundTripAndUnknownKey) {
  TransformerConfig c;
  c.src_vocab = 100;
  c.tgt_vocab = 120;
  c.d_model = 64;
  c.heads = 4;
  c.enc_layers = 3;
  c.dec_layers = 2;
  c.d_ff = 128;
  c.dropout = 0.25;
  c.attention_dropout = 0.125;
  c.activation = "gelu";
  c.pre_norm = true;
  c.tie_output = true;
  c.max_len = 77;
  c.pad_id = 3;
  c.bos_id = 4;
  c.eos_id = 5;
  c.positional = PositionalKind::learned;
  c.scale_embeddings = false;
  nlohmann::json j = c;
  TransformerConfig back = j.get<TransformerConfig>();
  EXPECT_EQ(nlohmann::json(back), j);
  EXPECT_EQ(back.positional, PositionalKind::learned);
  EXPECT_EQ(back.dropout, 0.25);
  EXPECT_EQ(j.size(), 19u);  // every field is written

  nlohmann::json bad = j;
  bad["num_heads"] = 4;
  try {
    bad.get<TransformerConfig>();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_heads"), std::string::npos) << e.what();
  }
  nlohmann::json wrong_type = j;
  wrong_type["pre_norm"] = "yes";
  EXPECT_THROW(wrong_type.get<TransformerConfig>(), Error);
  nlohmann::json invalid = j;
  invalid["heads"] = 5;  // 64 % 5 != 0
  try {
    invalid.get<TransformerConfig>();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("heads"), std::string::npos) << e.what();
  }
  nlohmann::json shared = j;
  shared["shared_embeddings"] = true;  // 100 != 120
  EXPECT_THROW(shared.get<TransformerConfig>(), Error);
}

TEST(Transformer, PositionalChoicesInJson) {
  nlohmann::json j = {{"src_vocab", 10}, {"tgt_vocab", 10}, {"d_model", 16}, {"heads", 2}};
  TransformerConfig c = j.get<TransformerConfig>();
  EXPECT_EQ(c.positional, PositionalKind::sinusoidal);
  EXPECT_EQ(nlohmann::json(c).size(), 19u);  // no relative / rope keys for the absolute kinds

  j["positional"] = "relative";
  j["relative_clip"] = 4;
  c = j.get<TransformerConfig>();
  EXPECT_EQ(c.positional, PositionalKind::relative);
  EXPECT_EQ(c.relative_clip, 4);
  nlohmann::json back = c;
  EXPECT_EQ(back["relative_clip"], 4);
  EXPECT_FALSE(back.contains("rope_base"));
  EXPECT_EQ(back.get<TransformerConfig>().relative_clip, 4);
  Transformer rel(c);
  auto sd = rel.state_dict();
  EXPECT_EQ(sd.count("src_pos.weight") + sd.count("tgt_pos.weight"), 0u);
  ASSERT_EQ(sd.count("encoder.layers.0.self_attn.relative_key"), 1u);
  EXPECT_EQ(sd.at("decoder.layers.0.self_attn.relative_value").shape(), Shape({9, 8}));
  EXPECT_EQ(sd.count("decoder.layers.0.encoder_attn.relative_key"), 0u);  // none in cross-attention

  j.erase("relative_clip");
  j["positional"] = "rope";
  j["rope_base"] = 500.0;
  j["rope_style"] = "half";
  c = j.get<TransformerConfig>();
  EXPECT_EQ(c.positional, PositionalKind::rope);
  EXPECT_EQ(c.rope_base, 500.0);
  EXPECT_EQ(nlohmann::json(c).get<TransformerConfig>().rope_style, "half");
  Transformer rope(c), plain(j.get<TransformerConfig>());
  EXPECT_EQ(rope.state_dict().size(), plain.state_dict().size());

  auto expect_error = [](nlohmann::json bad, const std::string& word) {
    try {
      bad.get<TransformerConfig>();
      ADD_FAILURE() << "expected an error for " << bad.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  nlohmann::json bad = j;
  bad["rope_style"] = "spiral";
  expect_error(bad, "rope_style");
  bad = j;
  bad["positional"] = "absolute";
  expect_error(bad, "positional");
  bad = j;
  bad["relative_clip"] = 3;  // with rope
  expect_error(bad, "relative_clip");
  bad = j;
  bad["positional"] = "relative";
  bad.erase("rope_style");
  bad.erase("rope_base");
  bad["relative_clip"] = 0;
  expect_error(bad, "relative_clip");
  bad = j;
  bad["heads"] = 16;  // head size 1: rope needs pairs
  expect_error(bad, "rope");
  j.erase("rope_base");
  j.erase("rope_style");
  j["positional"] = "none";
  EXPECT_EQ(j.get<TransformerConfig>().positional, PositionalKind::none);
}

TEST(Transformer, TiedAndSharedParametersAreSavedOnceAndReloadBitIdentical) {
  TransformerConfig c;
  c.src_vocab = c.tgt_vocab = 30;
  c.d_model = 16;
  c.heads = 2;
  c.enc_layers = c.dec_layers = 1;
  c.d_ff = 32;
  c.shared_embeddings = true;
  c.tie_output = true;
  c.max_len = 20;
  Generator g1(1), g2(2);
  Transformer a(c, g1), b(c, g2);
  a.eval();
  b.eval();
  auto sd = a.state_dict();
  EXPECT_EQ(sd.count("src_embed.weight"), 1u);
  EXPECT_EQ(sd.count("tgt_embed.weight"), 0u);   // shared: saved once
  EXPECT_EQ(sd.count("generator.weight"), 0u);   // tied
  EXPECT_EQ(sd.count("generator.bias"), 1u);
  EXPECT_TRUE(a.generator->weight.same(a.src_embed->weight));
  auto dir = std::filesystem::temp_directory_path() / ("qkv_test_tf_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "model.safetensors").string();
  a.save(path);
  Tensor src = Tensor::from_vector<int64_t>({5, 6, 7, 0, 8, 9, 10, 11}, {2, 4});
  Tensor pad = Tensor::from_vector<uint8_t>({0, 0, 0, 1, 0, 0, 0, 0}, {2, 4});
  Tensor tgt = Tensor::from_vector<int64_t>({1, 12, 13, 1, 14, 15}, {2, 3});
  NoGradGuard ng;
  ASSERT_FALSE(bit_equal(a.forward(src, pad, tgt), b.forward(src, pad, tgt)));
  b.load(path);
  EXPECT_TRUE(bit_equal(a.forward(src, pad, tgt), b.forward(src, pad, tgt)));
  EXPECT_TRUE(b.generator->weight.same(b.tgt_embed->weight));  // still tied after loading
  std::filesystem::remove_all(dir);
}

TEST(Transformer, BadInputsNameTheField) {
  TransformerConfig c;
  c.src_vocab = c.tgt_vocab = 10;
  c.d_model = 8;
  c.heads = 2;
  c.enc_layers = c.dec_layers = 1;
  c.d_ff = 8;
  c.max_len = 4;
  Transformer m(c);
  Tensor src = Tensor::from_vector<int64_t>({3, 4, 5, 6, 7}, {1, 5});  // longer than max_len
  Tensor tgt = Tensor::from_vector<int64_t>({1}, {1, 1});
  try {
    m.forward(src, Tensor(), tgt);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_len"), std::string::npos) << e.what();
  }
  EXPECT_THROW(m.forward(Tensor::from_vector<int64_t>({3, 40}, {1, 2}), Tensor(), tgt), Error);  // id 40 >= vocab
  auto st = m.start(Tensor::from_vector<int64_t>({3, 4}, {1, 2}), Tensor());
  EXPECT_THROW(m.step(*st, Tensor::from_vector<int64_t>({1, 1}, {2})), Error);  // 2 tokens for 1 row
  for (int i = 0; i < 4; ++i) m.step(*st, Tensor::from_vector<int64_t>({1}, {1}));
  EXPECT_THROW(m.step(*st, Tensor::from_vector<int64_t>({1}, {1})), Error);  // past max_len
}
