// BERT (models/bert) through Hugging Face's published layout (io/bert) against a BERT written in
// PyTorch from the paper and that layout (tools/refs/models_bert.py, float64 from the same float32
// weights): hidden states, pooler output, MLM and NSP logits of a right-padded batch with two
// segments, and every parameter's gradient of the MLM + NSP loss. Also: what a partial checkpoint
// reports, save -> load bits, and errors naming the file and the tensor or key.
#include "qkv/io/bert.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>

#include "qkv/autograd/node.h"
#include "qkv/io/format/safetensors.h"
#include "qkv/io/format/safetensors_reader.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/loss.h"
#include "qkv/ops/shape.h"
#include "qkv/util/file.h"
#include "helpers.h"
#include "scratch_util.h"
#include "packed_rows.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

}  // namespace

TEST(BertCheckpoint, OutputsOfAPaddedTwoSegmentBatchMatchTorch) {
  RefFile ref("models_bert");
  io::BertBundle b = io::load_bert(case_dir(ref, "pretraining"));
  ASSERT_TRUE(b.mlm && b.nsp);
  EXPECT_TRUE(b.report.initialised.empty());
  // ignored: the position_ids buffer only; the stored tied decoder is checked, not ignored
  EXPECT_EQ(b.report.ignored, std::vector<std::string>{"bert.embeddings.position_ids"});
  NoGradGuard ng;
  models::BertOutput o = b.bert->forward(ref.get("pretraining", "ids"), ref.get("pretraining", "token_type_ids"),
                                         ref.get("pretraining", "key_pad"));
  // Every position, padding included: a padding query attends to the real keys as in torch.
  EXPECT_CLOSE(o.hidden, ref.get("pretraining", "hidden"), scaled_tol(ref.get("pretraining", "hidden")));
  EXPECT_CLOSE(o.pooled, ref.get("pretraining", "pooled"), scaled_tol(ref.get("pretraining", "pooled")));
  Tensor mlm = b.mlm->forward(o.hidden), nsp = b.nsp->forward(o.pooled);
  EXPECT_CLOSE(mlm, ref.get("pretraining", "mlm_logits"), scaled_tol(ref.get("pretraining", "mlm_logits")));
  EXPECT_CLOSE(nsp, ref.get("pretraining", "nsp_logits"), scaled_tol(ref.get("pretraining", "nsp_logits")));
}

// The same batch without its padding (Bert::hidden_packed, what tasks::Embedder runs): every
// real token's state is torch's for the padded batch.
TEST(BertCheckpoint, PackedRowsGiveTorchsStatesOfThePaddedBatch) {
  RefFile ref("models_bert");
  io::BertBundle b = io::load_bert(case_dir(ref, "pretraining"));
  NoGradGuard ng;
  const PackedRows p = pack_padded(ref.get("pretraining", "ids"), ref.get("pretraining", "token_type_ids"),
                                   ref.get("pretraining", "key_pad"));
  const int64_t N = p.ids.size(1);
  ASSERT_LT(N, ref.get("pretraining", "ids").numel()) << "the case should have padding";
  const Tensor h = b.bert->hidden_packed(p.ids, p.types, p.lengths);  // (1, N, D)
  const Tensor want = p.real_concat(ref.get("pretraining", "hidden"));  // (N, D)
  EXPECT_CLOSE(reshape(h, {N, want.size(1)}), want, scaled_tol(want));
  // Lengths that do not cover the ids, or a row past the position table, name what is wrong.
  EXPECT_THROW(b.bert->hidden_packed(p.ids, {}, {N - 1}), Error);
  EXPECT_THROW(b.bert->hidden_packed(Tensor::zeros({1, 600}, DType::i64), {}, {600}), Error);
}

// The packed entry points' input: sequences end to end, segment 0 where none is given.
TEST(BertPackedSequences, LaysSequencesEndToEndAndNamesABadOne) {
  models::PackedSequences p;
  p.add(std::vector<int64_t>{5, 6, 7}, {0, 1, 1});
  p.add(std::vector<int32_t>{8});  // QA features hold int32 ids
  p.add(std::vector<int64_t>{9, 10});
  EXPECT_EQ(p.ids().to_vector<int64_t>(), (std::vector<int64_t>{5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(p.token_types().to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 0, 0, 0}));
  EXPECT_EQ(p.ids().shape(), (Shape{1, 6}));
  EXPECT_EQ(p.lengths(), (std::vector<int64_t>{3, 1, 2}));
  EXPECT_EQ(p.start(2), 4);
  EXPECT_THROW(p.add(std::vector<int64_t>{}), Error);
  try {
    p.add(std::vector<int64_t>{1, 2}, {0});
    FAIL() << "one type for two ids was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sequence 3"), std::string::npos) << e.what();
  }
  EXPECT_EQ(p.lengths().size(), 3u);  // the bad sequences left nothing behind
}

TEST(BertCheckpoint, PretrainingLossAndEveryGradientMatchTorch) {
  RefFile ref("models_bert");
  const std::string c = "pretraining";
  io::BertBundle b = io::load_bert(case_dir(ref, c));
  models::BertForPreTraining model(b.bert, b.mlm, b.nsp);
  model.eval();  // no dropout: the reference has none
  auto logits = model.forward(ref.get(c, "ids"), ref.get(c, "token_type_ids"), ref.get(c, "key_pad"));
  const int64_t V = b.config.vocab_size;
  Tensor loss = add(cross_entropy(reshape(logits.mlm, {-1, V}), reshape(ref.get(c, "mlm_labels"), {-1}), -100),
                    cross_entropy(logits.nsp, ref.get(c, "nsp_labels"), -100));
  EXPECT_CLOSE(loss, ref.get(c, "loss"), kF32);
  backward(loss);
  auto params = io::bert_published_parameters(b);
  EXPECT_EQ(params.size(), model.named_parameters().size());  // every parameter has a published name
  size_t compared = 0;
  for (auto& [name, p] : params) {
    SCOPED_TRACE(name);
    Tensor want = ref.get(c, "grad." + name);
    ASSERT_TRUE(p.grad().defined());
    EXPECT_CLOSE(p.grad(), want, scaled_tol(want));
    ++compared;
  }
  size_t in_ref = 0;
  for (auto& [name, t] : ref.contents().tensors) in_ref += name.rfind(c + "/grad.", 0) == 0;
  EXPECT_EQ(compared, in_ref);
}

// Loaded to be held in bf16 (precision bf16): the file's copy of the tied decoder is still checked
// against the word embeddings as stored, and every weight is its f32 load's rounding.
TEST(BertCheckpoint, LoadsIntoBf16WithTheStoredDecoderCopy) {
  RefFile ref("models_bert");
  const std::string dir = case_dir(ref, "pretraining");
  ASSERT_TRUE(safetensors::Reader(dir + "/model.safetensors").contains("cls.predictions.decoder.weight"));
  io::BertBundle held = io::load_bert(dir, {}, {}, kernels::MatmulPrecision::bf16), f32 = io::load_bert(dir);
  EXPECT_EQ(held.report.loaded, f32.report.loaded);
  EXPECT_EQ(held.mlm->decoder_weight.dtype(), DType::bf16);
  f32.bert->hold_weights_in_bf16();
  const auto want = f32.bert->state_dict();
  for (auto& [name, t] : held.bert->state_dict()) EXPECT_TRUE(bit_equal(t, want.at(name))) << name;
}

TEST(BertCheckpoint, BareEncoderWithOldNamesReportsWhatItInitialisedAndIgnored) {
  RefFile ref("models_bert");
  const std::string c = "bare_encoder";
  io::BertBundle b = io::load_bert(case_dir(ref, c));
  EXPECT_EQ(b.config.hidden_act, "gelu_new");
  const auto& r = b.report;
  EXPECT_TRUE(contains(r.loaded, "bert.embeddings.LayerNorm.weight"));  // stored as embeddings.LayerNorm.gamma
  EXPECT_TRUE(contains(r.loaded, "bert.encoder.layer.1.output.LayerNorm.bias"));
  for (const char* n : {"bert.pooler.dense.weight", "bert.pooler.dense.bias", "cls.predictions.bias",
                        "cls.predictions.transform.dense.weight", "cls.predictions.transform.LayerNorm.weight",
                        "cls.seq_relationship.weight", "cls.seq_relationship.bias"})
    EXPECT_TRUE(contains(r.initialised, n)) << n;
  EXPECT_EQ(r.ignored, (std::vector<std::string>{"classifier.bias", "classifier.weight"}));
  EXPECT_NE(r.summary().find("newly initialised: bert.pooler.dense.weight"), std::string::npos) << r.summary();
  EXPECT_NE(r.summary().find("ignored: classifier.weight"), std::string::npos) << r.summary();
  NoGradGuard ng;
  Tensor h = b.bert->hidden(ref.get(c, "ids"), ref.get(c, "token_type_ids"), ref.get(c, "key_pad"));
  EXPECT_CLOSE(h, ref.get(c, "hidden"), scaled_tol(ref.get(c, "hidden")));
  // Without heads asked for, the pretraining checkpoint's heads are ignored, not errors.
  io::BertBundle enc = io::load_bert(case_dir(ref, "pretraining"), io::BertHeads{false, false});
  EXPECT_FALSE(enc.mlm || enc.nsp);
  EXPECT_TRUE(contains(enc.report.ignored, "cls.seq_relationship.weight"));
  EXPECT_TRUE(contains(enc.report.ignored, "cls.predictions.decoder.weight"));
  EXPECT_TRUE(enc.report.initialised.empty());
}

TEST(BertCheckpoint, SaveWritesThePublishedLayoutAndLoadsTheSameBits) {
  RefFile ref("models_bert");
  const std::string src = case_dir(ref, "pretraining"), out = qkv_test::fresh_temp_path("bert", "save");
  io::BertBundle b = io::load_bert(src);
  ASSERT_TRUE(b.tokenizer != nullptr);
  io::save_bert(out, b);
  auto orig = safetensors::load(src + "/model.safetensors").tensors;
  auto mine = safetensors::load(out + "/model.safetensors").tensors;
  // Every stored parameter comes back under its published name, bit for bit; qkv does not write
  // the position_ids buffer or the tied decoder (Hugging Face's BertForPreTraining ties it on load).
  for (auto& [name, t] : orig) {
    if (name == "bert.embeddings.position_ids" || name == "cls.predictions.decoder.weight") {
      EXPECT_FALSE(mine.count(name)) << name;
      continue;
    }
    ASSERT_TRUE(mine.count(name)) << name;
    EXPECT_TRUE(bit_equal(mine.at(name), t)) << name;
  }
  EXPECT_EQ(mine.size(), orig.size() - 2);
  EXPECT_TRUE(fs::exists(out + "/vocab.txt"));
  EXPECT_TRUE(fs::exists(out + "/tokenizer.json"));
  auto cfg = nlohmann::json::parse(read_file(out + "/config.json"));
  EXPECT_EQ(cfg["architectures"][0], "BertForPreTraining");
  EXPECT_EQ(cfg["model_type"], "bert");
  io::BertBundle again;
  expect_load_peak_near_kept([&] { again = io::load_bert(out); }, 1.25, "load_bert");
  EXPECT_EQ(nlohmann::json(again.config), nlohmann::json(b.config));
  EXPECT_TRUE(again.report.initialised.empty() && again.report.ignored.empty());
  auto p0 = io::bert_published_parameters(b), p1 = io::bert_published_parameters(again);
  ASSERT_EQ(p0.size(), p1.size());
  for (auto& [name, t] : p0) EXPECT_TRUE(bit_equal(p1.at(name), t)) << name;
  EXPECT_EQ(again.tokenizer->vocab_size(), b.tokenizer->vocab_size());
}

// Rewrites the reference's pretraining directory with `edit` applied to its tensors / config /
// vocabulary, then expects load_bert to fail with a message containing every string of `needles`.
void expect_bert_load_error(const std::string& name,
                            const std::function<void(std::map<std::string, Tensor>&)>& edit_tensors,
                            const std::function<void(nlohmann::json&)>& edit_config,
                            const std::vector<std::string>& needles, const std::string& extra_vocab_lines = "") {
  RefFile ref("models_bert");
  const std::string src = case_dir(ref, "pretraining"), dir = qkv_test::fresh_temp_path("bert", name);
  fs::create_directories(dir);
  auto tensors = safetensors::load(src + "/model.safetensors").tensors;
  nlohmann::json cfg = nlohmann::json::parse(read_file(src + "/config.json"));
  if (edit_tensors) edit_tensors(tensors);
  if (edit_config) edit_config(cfg);
  safetensors::save(dir + "/model.safetensors", tensors);
  write_file_atomic(dir + "/config.json", cfg.dump(2));
  write_file_atomic(dir + "/vocab.txt", read_file(src + "/vocab.txt") + extra_vocab_lines);
  try {
    io::load_bert(dir);
    ADD_FAILURE() << name << ": loaded without error";
  } catch (const Error& e) {
    for (auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << name << ": " << e.what();
  }
}

TEST(BertCheckpoint, BadCheckpointsNameTheFileAndTheTensorOrKey) {
  expect_bert_load_error("missing", [](auto& t) { t.erase("bert.encoder.layer.1.intermediate.dense.bias"); }, {},
                         {"model.safetensors", "bert.encoder.layer.1.intermediate.dense.bias", "missing"});
  expect_bert_load_error("unknown",
                         [](auto& t) { t["bert.encoder.layer.0.attention.self.scale"] = Tensor::zeros({1}); }, {},
                         {"model.safetensors", "bert.encoder.layer.0.attention.self.scale"});
  expect_bert_load_error("shape",
                         [](auto& t) {
                           t["bert.encoder.layer.0.attention.self.key.weight"] = Tensor::zeros({32, 31});
                         },
                         {}, {"bert.encoder.layer.0.attention.self.key.weight", "(32, 32)", "(32, 31)"});
  expect_bert_load_error("extra_layer", {}, [](auto& j) { j["num_hidden_layers"] = 3; },
                         {"bert.encoder.layer.2.", "missing"});
  expect_bert_load_error("vocab_size", {}, [](auto& j) { j["vocab_size"] = 50; },
                         {"bert.embeddings.word_embeddings.weight", "(50, 32)", "(47, 32)"});
  expect_bert_load_error("config_key", {}, [](auto& j) { j["hidden_sise"] = 32; }, {"config.json", "hidden_sise"});
  expect_bert_load_error("relative_positions", {}, [](auto& j) { j["position_embedding_type"] = "relative_key"; },
                         {"config.json", "position_embedding_type", "relative_key"});
  expect_bert_load_error("activation", {}, [](auto& j) { j["hidden_act"] = "gelu_fast"; },
                         {"config.json", "hidden_act", "gelu_fast"});
  expect_bert_load_error("decoder", {}, [](auto& j) { j["is_decoder"] = true; }, {"config.json", "is_decoder"});
  expect_bert_load_error("untied_decoder",
                         [](auto& t) {
                           t["cls.predictions.decoder.weight"] = Tensor::zeros({47, 32});
                         },
                         {}, {"cls.predictions.decoder.weight", "tied"});
  expect_bert_load_error("both_spellings",
                         [](auto& t) { t["embeddings.LayerNorm.gamma"] = t.at("bert.embeddings.LayerNorm.weight"); },
                         {}, {"embeddings.LayerNorm.gamma", "bert.embeddings.LayerNorm.weight"});
  std::string extra;  // 45 + 3 = 48 tokens for a model of vocab_size 47
  for (int i = 0; i < 3; ++i) extra += "extra" + std::to_string(i) + "\n";
  expect_bert_load_error("tokenizer_vocab", {}, {}, {"vocab.txt", "48", "vocab_size", "47"}, extra);
}

TEST(BertCheckpoint, TruncatedWeightsFileIsAClearError) {
  RefFile ref("models_bert");
  const std::string src = case_dir(ref, "pretraining"), dir = qkv_test::fresh_temp_path("bert", "truncated");
  fs::create_directories(dir);
  fs::copy_file(src + "/config.json", dir + "/config.json");
  std::string bytes = read_file(src + "/model.safetensors");
  write_file_atomic(dir + "/model.safetensors", bytes.substr(0, bytes.size() - 100));
  try {
    io::load_bert(dir);
    ADD_FAILURE() << "loaded a truncated file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.safetensors"), std::string::npos) << e.what();
  }
}

TEST(BertCheckpoint, InputLongerThanThePositionTableIsAnErrorNamingTheKey) {
  RefFile ref("models_bert");
  io::BertBundle b = io::load_bert(case_dir(ref, "pretraining"));
  NoGradGuard ng;
  Tensor ids = Tensor::full({1, 17}, 5, DType::i64);  // max_position_embeddings = 16
  try {
    b.bert->hidden(ids);
    ADD_FAILURE() << "17 tokens passed a 16-position table";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_position_embeddings"), std::string::npos) << e.what();
  }
  Tensor bad = Tensor::full({1, 4}, 47, DType::i64);  // one past vocab_size
  try {
    b.bert->hidden(bad);
    ADD_FAILURE() << "id 47 passed a vocabulary of 47";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vocab_size"), std::string::npos) << e.what();
  }
  Tensor types = Tensor::full({1, 4}, 2, DType::i64);  // type_vocab_size = 2
  try {
    b.bert->hidden(Tensor::full({1, 4}, 5, DType::i64), types);
    ADD_FAILURE() << "segment 2 passed type_vocab_size 2";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("type_vocab_size"), std::string::npos) << e.what();
  }
}

TEST(BertCheckpoint, TheDecodersBiasStandsForTheHeadsBiasWhenOnlyItIsStored) {
  RefFile ref("models_bert");
  const std::string src = case_dir(ref, "pretraining"), dir = qkv_test::fresh_temp_path("bert", "decoder_bias");
  fs::create_directories(dir);
  auto tensors = safetensors::load(src + "/model.safetensors").tensors;
  const Tensor bias = tensors.at("cls.predictions.bias");
  tensors.erase("cls.predictions.bias");
  tensors["cls.predictions.decoder.bias"] = bias;
  safetensors::save(dir + "/model.safetensors", tensors);
  fs::copy_file(src + "/config.json", dir + "/config.json");
  io::BertBundle b = io::load_bert(dir);
  EXPECT_TRUE(bit_equal(b.mlm->bias, bias));
  EXPECT_TRUE(contains(b.report.loaded, "cls.predictions.bias"));
  EXPECT_FALSE(contains(b.report.initialised, "cls.predictions.bias"));
  tensors["cls.predictions.bias"] = Tensor::zeros(bias.shape());  // both stored, different: an error
  safetensors::save(dir + "/model.safetensors", tensors);
  try {
    io::load_bert(dir);
    ADD_FAILURE() << "loaded a decoder bias that differs from the head's";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cls.predictions.decoder.bias"), std::string::npos) << e.what();
  }
}

TEST(BertCheckpoint, MissingFilesAndInvalidConfigNameTheFile) {
  RefFile ref("models_bert");
  const std::string src = case_dir(ref, "pretraining"), dir = qkv_test::fresh_temp_path("bert", "files");
  auto error_of = [&] {
    try {
      io::load_bert(dir);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error_of().find(dir), std::string::npos);  // no directory
  fs::create_directories(dir);
  EXPECT_NE(error_of().find("config.json"), std::string::npos);
  write_file_atomic(dir + "/config.json", "{\"hidden_size\": 32,");  // cut short
  fs::copy_file(src + "/model.safetensors", dir + "/model.safetensors");
  const std::string bad_json = error_of();
  EXPECT_NE(bad_json.find("config.json"), std::string::npos) << bad_json;
  EXPECT_NE(bad_json.find("JSON"), std::string::npos) << bad_json;
  fs::remove(dir + "/model.safetensors");
  fs::copy_file(src + "/config.json", dir + "/config.json", fs::copy_options::overwrite_existing);
  EXPECT_NE(error_of().find("model.safetensors"), std::string::npos);
}
