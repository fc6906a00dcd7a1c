// RNN encoder-decoders against torch.nn.LSTM / GRU + hand-written attention
// (tools/refs/models_rnn.py, cases fwd_*): logits, loss, every parameter gradient, attention
// weights; incremental decoding (start/step/select_rows) against the same logits; config JSON
// and its errors; save/load; bad inputs.
#include "qkv/models/rnn_seq2seq.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "qkv/autograd/node.h"
#include "qkv/ops/loss.h"
#include "qkv/ops/shape.h"
#include "logits_at.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;
using namespace qkv::models;

namespace {

const std::vector<std::string> kCases = {
    "fwd_none",         "fwd_bahdanau",       "fwd_luong_dot",           "fwd_luong_general",
    "fwd_luong_concat", "fwd_luong_location", "fwd_bahdanau_lstm_zeros", "fwd_none_gru_linear",
    "fwd_luong_location_gru"};

std::unique_ptr<RnnSeq2Seq> load_model(const RefFile& ref, const std::string& c) {
  auto cfg = RnnSeq2SeqConfig::parse(ref.params(c)["config"], c);
  auto m = std::make_unique<RnnSeq2Seq>(cfg);
  std::map<std::string, Tensor> sd;
  for (auto& [name, t] : ref.contents().tensors)
    if (name.rfind(c + "/p.", 0) == 0) sd[name.substr(c.size() + 3)] = t;
  m->load_state_dict(sd, /*strict=*/true, c);  // every qkv name present in torch's model, none extra
  m->eval();
  return m;
}

std::string config_error(const nlohmann::json& j) {
  try {
    RnnSeq2SeqConfig::parse(j, "cfg.json", "model");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

nlohmann::json small_config() {
  return {{"src_vocab", 20}, {"tgt_vocab", 22}, {"cell", "lstm"}, {"embed_dim", 8}, {"enc_hidden", 8},
          {"dec_hidden", 8}, {"attention", "luong"}, {"score", "general"}, {"max_len", 12}};
}

}  // namespace

TEST(RnnSeq2Seq, LogitsLossGradientsAndAttentionMatchTorch) {
  RefFile ref("models_rnn");
  for (auto& c : kCases) {
    SCOPED_TRACE(c);
    auto m = load_model(ref, c);
    Tensor src = ref.get(c, "src"), pad = ref.get(c, "src_pad"), tgt_in = ref.get(c, "tgt_in");
    Tensor logits = m->forward(src, pad, tgt_in);
    EXPECT_CLOSE(logits, ref.get(c, "logits"), scaled_tol(ref.get(c, "logits")));
    Tensor loss = cross_entropy(logits, ref.get(c, "tgt_out"), m->config().pad_id);
    EXPECT_CLOSE(loss, ref.get(c, "loss"), kF32);
    backward(loss);
    size_t n = 0;
    for (auto& [name, t] : m->named_parameters()) {
      SCOPED_TRACE(name);
      Tensor expected = ref.get(c, "g." + name);
      EXPECT_CLOSE(t.grad(), expected, scaled_tol(expected));
      ++n;
    }
    size_t expected = 0;
    for (auto& [name, t] : ref.contents().tensors) expected += name.rfind(c + "/g.", 0) == 0;
    EXPECT_EQ(n, expected);

    m->train();  // cross_attention() runs in eval mode and restores the flag
    AttentionMaps maps = m->cross_attention(src, pad, tgt_in);
    EXPECT_TRUE(m->is_training());
    if (m->config().attention == RnnAttentionKind::none) {
      EXPECT_TRUE(maps.layers.empty());
      EXPECT_FALSE(ref.has(c, "weights"));
    } else {
      ASSERT_EQ(maps.layers.size(), 1u);
      Tensor w = ref.get(c, "weights");  // (B, T, S)
      EXPECT_EQ(maps.layers[0].shape(), Shape({w.size(0), 1, w.size(1), w.size(2)}));
      EXPECT_CLOSE(reshape(maps.layers[0], w.shape()), w, kF32);
    }
  }
}

TEST(RnnSeq2Seq, IncrementalDecodingEqualsFullForwardStepByStep) {
  RefFile ref("models_rnn");
  for (auto& c : kCases) {
    SCOPED_TRACE(c);
    auto m = load_model(ref, c);
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
    }
  }
}

TEST(RnnSeq2Seq, SelectRowsReordersHypothesesLikeBeamSearch) {
  RefFile ref("models_rnn");
  for (auto& c : kCases) {
    SCOPED_TRACE(c);
    auto m = load_model(ref, c);
    Tensor tgt_in = ref.get(c, "tgt_in"), logits = ref.get(c, "logits");
    auto state = m->start(ref.get(c, "src"), ref.get(c, "src_pad"));
    for (int64_t t = 0; t < 2; ++t) m->step(*state, contiguous(slice(tgt_in, 1, t, t + 1)));
    std::vector<int64_t> rows = {3, 0, 2, 3, 1, 0};  // 6 hypotheses from 4 sentences, with repeats
    state->select_rows(rows);
    EXPECT_EQ(state->rows(), 6);
    Tensor tgt_rows = index_select(tgt_in, 0, Tensor::from_vector<int64_t>(rows, {6}));
    for (int64_t t = 2; t < tgt_in.size(1); ++t) {
      SCOPED_TRACE(t);
      if (t == 4) {  // a second reordering of the current hypotheses
        std::vector<int64_t> again = {5, 5, 1, 0, 3, 2};
        state->select_rows(again);
        std::vector<int64_t> composed;
        for (int64_t r : again) composed.push_back(rows[size_t(r)]);
        rows = composed;
        tgt_rows = index_select(tgt_in, 0, Tensor::from_vector<int64_t>(rows, {6}));
      }
      Tensor out = m->step(*state, contiguous(slice(tgt_rows, 1, t, t + 1)));
      EXPECT_CLOSE(out, logits_at(logits, rows, t), scaled_tol(logits));
    }
    EXPECT_THROW(state->select_rows({7}), Error);
  }
}

TEST(RnnSeq2Seq, ConfigJsonRoundTrip) {
  for (auto& c : kCases) {
    SCOPED_TRACE(c);
    RefFile ref("models_rnn");
    nlohmann::json j = ref.params(c)["config"];
    RnnSeq2SeqConfig cfg = j.get<RnnSeq2SeqConfig>();
    nlohmann::json back = cfg;
    EXPECT_EQ(back.get<RnnSeq2SeqConfig>().key_dim(), cfg.key_dim());
    EXPECT_EQ(nlohmann::json(back.get<RnnSeq2SeqConfig>()), back);
    for (auto& [k, v] : j.items()) EXPECT_EQ(back.at(k), v) << k;  // the reference's keys read back unchanged
  }
}

TEST(RnnSeq2Seq, ConfigErrorsNameFileKeyAndWhatFits) {
  auto expect_error = [](const nlohmann::json& j, std::vector<std::string> parts) {
    std::string e = config_error(j);
    ASSERT_FALSE(e.empty()) << j.dump();
    for (auto& p : parts) EXPECT_NE(e.find(p), std::string::npos) << "'" << p << "' not in: " << e;
  };
  nlohmann::json ok = small_config();
  EXPECT_EQ(config_error(ok), "");

  auto j = ok;
  j["hiden"] = 3;  // a typo
  expect_error(j, {"cfg.json", "model.hiden"});
  j = ok;
  j["attention"] = "multihead";
  expect_error(j, {"cfg.json", "model.attention", "bahdanau", "multihead"});
  j = ok;
  j["cell"] = "rnn";
  expect_error(j, {"model.cell", "lstm", "gru"});
  j = ok;
  j["score"] = "cosine";
  expect_error(j, {"model.score", "dot", "general", "concat", "location"});
  // Bidirectional encoder (2 * 8 = 16) into an 8-wide decoder with the default copy bridge.
  j = ok;
  j["bidirectional"] = true;
  expect_error(j, {"cfg.json", "model.bridge", "dec_hidden == 2 * enc_hidden", "16", "linear"});
  j["bridge"] = "linear";
  EXPECT_EQ(config_error(j), "");
  // Luong dot needs s and h of equal width.
  j["score"] = "dot";
  expect_error(j, {"model.score", "dot", "16", "general"});
  j["dec_hidden"] = 16;
  EXPECT_EQ(config_error(j), "");
  // Copy across different depths.
  j = ok;
  j["dec_layers"] = 2;
  expect_error(j, {"model.bridge", "dec_layers == enc_layers"});
  // Options of another variant.
  j = ok;
  j["attention"] = "bahdanau";
  expect_error(j, {"model.score", "Luong"});
  j.erase("score");
  j["input_feeding"] = true;
  expect_error(j, {"model.input_feeding", "bahdanau"});
  j.erase("input_feeding");
  j["attn_dim"] = 6;
  EXPECT_EQ(config_error(j), "");
  j = ok;
  j["attn_dim"] = 6;  // luong general has no MLP
  expect_error(j, {"model.attn_dim", "general"});
  j["score"] = "location";  // nor has location scoring: W_a is (max_len, dec_hidden)
  expect_error(j, {"model.attn_dim", "location"});
  j.erase("attn_dim");
  EXPECT_EQ(config_error(j), "");
  j = ok;
  j["attention"] = "none";
  j.erase("score");
  j["bridge"] = "zeros";
  expect_error(j, {"model.bridge", "zeros"});
  j = ok;
  j["dropout"] = "0.1";
  expect_error(j, {"model.dropout", "number"});
  j = ok;
  j.erase("src_vocab");
  expect_error(j, {"model.src_vocab", "missing"});
  j = ok;
  j["eos_id"] = 30;
  expect_error(j, {"model.eos_id", "tgt_vocab"});
}

TEST(RnnSeq2Seq, SaveLoadIsBitIdenticalAndNamesAreTorchs) {
  RnnSeq2SeqConfig c = small_config().get<RnnSeq2SeqConfig>();
  c.bidirectional = true;
  c.bridge = RnnBridge::linear;
  c.input_feeding = true;
  Generator g1(1), g2(2);
  RnnSeq2Seq a(c, g1), b(c, g2);
  a.eval();
  b.eval();
  auto sd = a.state_dict();
  for (const char* name : {"encoder.weight_ih_l0", "encoder.weight_hh_l0_reverse", "decoder.bias_hh_l0",
                           "bridge_h.weight", "bridge_c.bias", "attention.attn.weight", "attn_out.weight",
                           "generator.bias", "src_embed.weight", "tgt_embed.weight"})
    EXPECT_EQ(sd.count(name), 1u) << name;
  EXPECT_EQ(sd.count("attn_out.bias"), 0u);  // Luong's W_c has no bias
  EXPECT_EQ(sd.at("decoder.weight_ih_l0").size(1), c.embed_dim + c.dec_hidden);  // [y; h~_{t-1}]
  for (float v : slice(sd.at("src_embed.weight"), 0, 0, 1).to_vector<float>()) EXPECT_EQ(v, 0.f);  // pad row
  for (float v : sd.at("generator.weight").to_vector<float>()) EXPECT_LE(std::abs(v), 0.1f);

  auto dir = std::filesystem::temp_directory_path() / ("qkv_test_rnn_" + std::to_string(::getpid()));
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
  std::filesystem::remove_all(dir);
}

TEST(RnnSeq2Seq, PaddingIsMaskedAndBadInputsNameTheProblem) {
  RnnSeq2SeqConfig c = small_config().get<RnnSeq2SeqConfig>();
  c.reverse_source = true;
  RnnSeq2Seq m(c);
  m.eval();
  NoGradGuard ng;
  // A padded sentence gives the same logits and attention as the same sentence alone.
  Tensor src = Tensor::from_vector<int64_t>({5, 6, 7, 0, 0, 8, 9, 10, 11, 12}, {2, 5});
  Tensor pad = Tensor::from_vector<uint8_t>({0, 0, 0, 1, 1, 0, 0, 0, 0, 0}, {2, 5});
  Tensor tgt = Tensor::from_vector<int64_t>({1, 12, 13, 1, 14, 15}, {2, 3});
  Tensor both = m.forward(src, pad, tgt);
  Tensor alone = m.forward(Tensor::from_vector<int64_t>({5, 6, 7}, {1, 3}), Tensor(),
                           Tensor::from_vector<int64_t>({1, 12, 13}, {1, 3}));
  EXPECT_CLOSE(contiguous(slice(both, 0, 0, 1)), alone, kF32);
  Tensor w = m.cross_attention(src, pad, tgt).layers.at(0);  // (2, 1, 3, 5)
  auto wv = contiguous(w).to_vector<float>();
  for (int64_t t = 0; t < 3; ++t) {
    EXPECT_EQ(wv[size_t(t * 5 + 3)], 0.f);
    EXPECT_EQ(wv[size_t(t * 5 + 4)], 0.f);
  }
  Tensor w_alone = m.cross_attention(Tensor::from_vector<int64_t>({5, 6, 7}, {1, 3}), Tensor(),
                                     Tensor::from_vector<int64_t>({1, 12, 13}, {1, 3})).layers.at(0);
  EXPECT_CLOSE(contiguous(slice(slice(w, 0, 0, 1), 3, 0, 3)), w_alone, kF32);

  auto message = [&](const Tensor& s, const Tensor& p) {
    try {
      m.forward(s, p, tgt);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // Padding in the middle of a row (left padding) is refused, not silently misread.
  std::string e = message(src, Tensor::from_vector<uint8_t>({1, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {2, 5}));
  EXPECT_NE(e.find("padding at the end"), std::string::npos) << e;
  e = message(src, Tensor::from_vector<uint8_t>({1, 1, 1, 1, 1, 0, 0, 0, 0, 0}, {2, 5}));
  EXPECT_NE(e.find("all padding"), std::string::npos) << e;
  e = message(Tensor::from_vector<int64_t>(std::vector<int64_t>(13, 4), {1, 13}), Tensor());
  EXPECT_NE(e.find("max_len"), std::string::npos) << e;
  auto st = m.start(Tensor::from_vector<int64_t>({3, 4}, {1, 2}), Tensor());
  EXPECT_THROW(m.step(*st, Tensor::from_vector<int64_t>({1, 1}, {2})), Error);  // 2 tokens for 1 row
}

TEST(RnnSeq2Seq, LocationAttentionScoresMaxLenPositionsAndIgnoresPadding) {
  nlohmann::json j = small_config();
  j["score"] = "location";
  j["input_feeding"] = true;
  RnnSeq2SeqConfig c = RnnSeq2SeqConfig::parse(j, "cfg.json", "model");
  EXPECT_EQ(nlohmann::json(c).at("score"), "location");
  RnnSeq2Seq m(c);
  m.eval();
  auto sd = m.state_dict();
  ASSERT_EQ(sd.count("attention.attn.weight"), 1u);
  EXPECT_EQ(sd.at("attention.attn.weight").shape(), Shape({c.max_len, c.dec_hidden}));  // W_a: one row per position
  EXPECT_EQ(sd.count("attention.attn.bias"), 0u);
  NoGradGuard ng;
  // A padded sentence gives the same logits and attention as the same sentence alone: W_a's rows
  // for padded positions are masked, those beyond S unused.
  Tensor src = Tensor::from_vector<int64_t>({5, 6, 7, 0, 0, 8, 9, 10, 11, 12}, {2, 5});
  Tensor pad = Tensor::from_vector<uint8_t>({0, 0, 0, 1, 1, 0, 0, 0, 0, 0}, {2, 5});
  Tensor tgt = Tensor::from_vector<int64_t>({1, 12, 13, 1, 14, 15}, {2, 3});
  Tensor one_src = Tensor::from_vector<int64_t>({5, 6, 7}, {1, 3});
  Tensor one_tgt = Tensor::from_vector<int64_t>({1, 12, 13}, {1, 3});
  EXPECT_CLOSE(contiguous(slice(m.forward(src, pad, tgt), 0, 0, 1)), m.forward(one_src, Tensor(), one_tgt), kF32);
  Tensor w = m.cross_attention(src, pad, tgt).layers.at(0);  // (2, 1, 3, 5)
  Tensor w_alone = m.cross_attention(one_src, Tensor(), one_tgt).layers.at(0);
  EXPECT_CLOSE(contiguous(slice(slice(w, 0, 0, 1), 3, 0, 3)), w_alone, kF32);
  std::vector<float> wv = contiguous(slice(slice(w, 0, 0, 1), 3, 3, 5)).to_vector<float>();
  for (float v : wv) EXPECT_EQ(v, 0.f);
  // A source longer than max_len names the field, and why location attention cares.
  try {
    m.forward(Tensor::from_vector<int64_t>(std::vector<int64_t>(13, 4), {1, 13}), Tensor(), one_tgt);
    ADD_FAILURE() << "a 13-token source was accepted with max_len 12";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("src length 13"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'max_len'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("location attention"), std::string::npos) << msg;
  }
}
