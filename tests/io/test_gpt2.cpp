// GPT (models/gpt) through the published GPT-2 layout (io/gpt2) against a GPT written in PyTorch
// from the papers and that layout (tools/refs/models_gpt.py): the reference writes model
// directories with random weights (published names without prefix and with the causal-mask
// buffers; with the "transformer." prefix; a post-LN GPT-1 variant); qkv loads them, and its
// logits (at every real token of a batch with right and left padding) and its gradients of the
// next-token loss must equal torch's. Also: save -> load bits, and errors naming the tensor.
#include "qkv/io/gpt2.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "qkv/autograd/node.h"
#include "qkv/io/format/safetensors.h"
#include "qkv/io/format/safetensors_reader.h"
#include "qkv/kernels/bf16.h"
#include "qkv/tensor/rng.h"
#include "qkv/ops/loss.h"
#include "qkv/ops/shape.h"
#include "qkv/util/file.h"
#include "helpers.h"
#include "scratch_util.h"
#include "ref.h"
#include "tiny_models.h"

using namespace qkv;
using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kCases = {"gpt2", "gpt2_prefixed", "gpt1_post_ln"};

// Logits (B, T, V) with the padding positions' rows set to zero in both tensors' copies: a padding
// query attends to nothing in qkv (zeros) and is never read by a model's user.
std::pair<Tensor, Tensor> real_positions(const Tensor& ours, const Tensor& ref, const Tensor& key_pad) {
  Tensor keep = unsqueeze(key_pad, 2);  // (B, T, 1)
  return {masked_fill(ours, keep, 0.0), masked_fill(ref, keep, 0.0)};
}

}  // namespace

TEST(Gpt2Checkpoint, LogitsOfAPaddedBatchMatchTorch) {
  RefFile ref("models_gpt");
  for (auto& c : kCases) {
    SCOPED_TRACE(c);
    io::GptBundle b = io::load_gpt2(case_dir(ref, c));
    EXPECT_EQ(b.config.pre_norm, ref.params(c)["pre_norm"].get<bool>());
    b.model->eval();
    NoGradGuard ng;
    Tensor pad = ref.get(c, "key_pad");
    Tensor logits = b.model->forward(ref.get(c, "ids"), pad, ref.get(c, "position_ids"));  // (B, T, V)
    auto [ours, want] = real_positions(logits, ref.get(c, "logits"), pad);
    EXPECT_CLOSE(ours, want, scaled_tol(want));
  }
}

TEST(Gpt2Checkpoint, LossAndEveryGradientMatchTorch) {
  RefFile ref("models_gpt");
  for (auto& c : kCases) {
    SCOPED_TRACE(c);
    io::GptBundle b = io::load_gpt2(case_dir(ref, c));
    b.model->eval();  // no dropout: the reference has none
    Tensor logits = b.model->forward(ref.get(c, "ids"), ref.get(c, "key_pad"), ref.get(c, "position_ids"));
    Tensor head = slice(logits, 1, 0, logits.size(1) - 1);  // predicts tokens 1 .. T-1
    Tensor loss = cross_entropy(head, ref.get(c, "targets"), -100);
    EXPECT_CLOSE(loss, ref.get(c, "loss"), kF32);
    backward(loss);
    // The reference's gradients are by published name; the same transposes and splits that map
    // weights map gradients, so gpt2_to_qkv puts them under qkv's names.
    std::map<std::string, Tensor> published;
    for (auto& [name, t] : ref.contents().tensors)
      if (name.rfind(c + "/grad.", 0) == 0) published[name.substr(c.size() + 6)] = t;
    auto want = io::gpt2_to_qkv(published, b.config, "reference gradients");
    auto params = b.model->named_parameters();
    ASSERT_EQ(params.size(), want.size());
    for (auto& [name, p] : params) {
      SCOPED_TRACE(name);
      ASSERT_TRUE(p.grad().defined());
      EXPECT_CLOSE(p.grad(), want.at(name), scaled_tol(want.at(name)));
    }
  }
}

TEST(Gpt2Checkpoint, SaveWritesThePublishedLayoutAndLoadsTheSameBits) {
  RefFile ref("models_gpt");
  for (auto& c : kCases) {
    SCOPED_TRACE(c);
    const std::string src = case_dir(ref, c);
    io::GptBundle b = io::load_gpt2(src);
    const std::string out = qkv_test::fresh_temp_path("gpt2", c);
    io::save_gpt2(out, b);
    // The written tensors are the reference's own, under the published names without prefix and
    // without the mask buffers: bit for bit.
    auto orig = safetensors::load(src + "/model.safetensors").tensors;
    auto mine = safetensors::load(out + "/model.safetensors").tensors;
    size_t compared = 0;
    for (auto& [name, t] : orig) {
      std::string bare = name.rfind("transformer.", 0) == 0 ? name.substr(12) : name;
      if (bare.find(".attn.bias") != std::string::npos || bare.find("masked_bias") != std::string::npos) continue;
      ASSERT_TRUE(mine.count(bare)) << bare;
      EXPECT_TRUE(bit_equal(mine.at(bare), t)) << bare;
      ++compared;
    }
    EXPECT_EQ(compared, mine.size());
    // Loading draws nothing (the model is built as zeros, then filled): the default generator
    // has not moved.
    const uint64_t seed = default_generator().seed(), offset = default_generator().offset();
    io::GptBundle again;
    expect_load_peak_near_kept([&] { again = io::load_gpt2(out); }, 1.5, "load_gpt2");
    EXPECT_EQ(default_generator().seed(), seed);
    EXPECT_EQ(default_generator().offset(), offset);
    EXPECT_EQ(nlohmann::json(again.config), nlohmann::json(b.config));
    for (auto& [name, t] : b.model->state_dict()) EXPECT_TRUE(bit_equal(again.model->state_dict().at(name), t)) << name;
  }
}

// Rewrites the reference's gpt2 directory with `edit` applied to its tensors / config, then expects
// load_gpt2 to fail with a message containing every string of `needles`.
void expect_gpt2_load_error(const std::string& name,
                            const std::function<void(std::map<std::string, Tensor>&)>& edit_tensors,
                            const std::function<void(nlohmann::json&)>& edit_config,
                            const std::vector<std::string>& needles) {
  RefFile ref("models_gpt");
  const std::string src = case_dir(ref, "gpt2"), dir = qkv_test::fresh_temp_path("gpt2", name);
  fs::create_directories(dir);
  auto tensors = safetensors::load(src + "/model.safetensors").tensors;
  nlohmann::json cfg = nlohmann::json::parse(read_file(src + "/config.json"));
  if (edit_tensors) edit_tensors(tensors);
  if (edit_config) edit_config(cfg);
  safetensors::save(dir + "/model.safetensors", tensors);
  write_file_atomic(dir + "/config.json", cfg.dump(2));
  try {
    io::load_gpt2(dir);
    ADD_FAILURE() << name << ": loaded without error";
  } catch (const Error& e) {
    for (auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << name << ": " << e.what();
  }
}

TEST(Gpt2Checkpoint, BadCheckpointsNameTheTensorOrKey) {
  expect_gpt2_load_error("missing", [](auto& t) { t.erase("h.1.mlp.c_fc.bias"); }, {},
                         {"h.1.mlp.c_fc.bias", "missing"});
  expect_gpt2_load_error("unknown", [](auto& t) { t["h.0.attn.c_attn.scale"] = Tensor::zeros({1}); }, {},
                         {"h.0.attn.c_attn.scale"});
  expect_gpt2_load_error("shape",
                         [](auto& t) {
                           t["h.0.attn.c_proj.weight"] = Tensor::zeros({32, 31});
                         },
                         {}, {"h.0.attn.c_proj.weight", "(32, 32)", "(32, 31)"});
  expect_gpt2_load_error("extra_layer", {}, [](auto& j) { j["n_layer"] = 3; }, {"h.2.", "missing"});
  expect_gpt2_load_error("config_key", {}, [](auto& j) { j["n_embdd"] = 32; }, {"config.json", "n_embdd"});
  expect_gpt2_load_error("config_value", {}, [](auto& j) { j["scale_attn_by_inverse_layer_idx"] = true; },
                         {"config.json", "scale_attn_by_inverse_layer_idx"});
  expect_gpt2_load_error("activation", {}, [](auto& j) { j["activation_function"] = "gelu_fast"; }, {"gelu_fast"});
  expect_gpt2_load_error("untied_head",
                         [](auto& t) { t["lm_head.weight"] = Tensor::zeros(t.at("wte.weight").shape()); }, {},
                         {"lm_head.weight", "tie"});
  expect_gpt2_load_error("mixed_prefix", [](auto& t) {
    t["transformer.wpe.weight"] = t.at("wpe.weight");
    t.erase("wpe.weight");
  }, {}, {"prefix"});
}

TEST(Gpt2Checkpoint, TruncatedWeightsFileIsAClearError) {
  RefFile ref("models_gpt");
  const std::string src = case_dir(ref, "gpt2"), dir = qkv_test::fresh_temp_path("gpt2", "truncated");
  fs::create_directories(dir);
  fs::copy_file(src + "/config.json", dir + "/config.json");
  std::string bytes = read_file(src + "/model.safetensors");
  write_file_atomic(dir + "/model.safetensors", bytes.substr(0, bytes.size() - 100));
  try {
    io::load_gpt2(dir);
    ADD_FAILURE() << "loaded a truncated file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.safetensors"), std::string::npos) << e.what();
  }
}

TEST(Gpt2Checkpoint, ThePublishedGpt2ConfigReads) {
  // config.json of the published 124M GPT-2 checkpoint, as its model card's repository has it.
  nlohmann::json j = nlohmann::json::parse(R"({
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
    "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
    "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "summary_activation": null,
    "summary_first_dropout": 0.1, "summary_proj_to_labels": true, "summary_type": "cls_index",
    "summary_use_proj": true, "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}},
    "vocab_size": 50257})");
  models::GptConfig c = j.get<models::GptConfig>();
  EXPECT_EQ(c.vocab_size, 50257);
  EXPECT_EQ(c.n_positions, 1024);
  EXPECT_EQ(c.n_embd, 768);
  EXPECT_EQ(c.n_layer, 12);
  EXPECT_EQ(c.n_head, 12);
  EXPECT_EQ(c.d_ff(), 3072);
  EXPECT_EQ(c.activation_function, "gelu_new");
  EXPECT_TRUE(c.pre_norm);
  j["n_ctx"] = 512;  // n_ctx must agree with n_positions
  EXPECT_THROW(j.get<models::GptConfig>(), Error);
}

// A tokenizer with more ids than config.json's vocab_size is refused at load, naming the tokenizer
// file (as BERT's is): its ids past the embedding surfaced only at use, blamed on the prompt.
TEST(Gpt2Checkpoint, ATokenizerLargerThanTheVocabularyIsRefusedAtLoad) {
  const std::string dir = qkv_test::fresh_temp_path("gpt2", "big_tokenizer");
  io::GptBundle b = qkv_test::tiny_gpt();
  io::save_gpt2(dir, b);
  EXPECT_NO_THROW(io::load_gpt2(dir));
  b.tokenizer = qkv_test::word_tokenizer({"<|endoftext|>", "<unk>", "<extra1>", "<extra2>"});
  b.tokenizer->save(dir + "/tokenizer.json");
  try {
    io::load_gpt2(dir);
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/tokenizer.json: the tokenizer has 18 ids but config.json's vocab_size "
                                         "is 16"),
              std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

// A weight holding NaN or an infinity is refused at load, naming the file, the tensor and the
// element, in every precision the weights can be held in (it loaded, and generation wrote NUL
// characters with exit code 0).
TEST(Gpt2Checkpoint, NonFiniteWeightsAreRefusedAtLoad) {
  const std::string dir = qkv_test::fresh_temp_path("gpt2", "non_finite");
  io::save_gpt2(dir, qkv_test::tiny_gpt());
  const std::string weights = dir + "/model.safetensors";
  std::map<std::string, Tensor> tensors;
  {
    const safetensors::Reader r(weights);
    for (const std::string& n : r.names()) tensors[n] = r.read(n);
  }
  for (const float bad : {std::nanf(""), -std::numeric_limits<float>::infinity()}) {
    std::map<std::string, Tensor> t = tensors;
    t["h.1.mlp.c_fc.weight"] = t["h.1.mlp.c_fc.weight"].clone();
    t["h.1.mlp.c_fc.weight"].data<float>()[37] = bad;
    safetensors::save(weights, t);
    for (auto p : {kernels::MatmulPrecision::fp32, kernels::MatmulPrecision::bf16, kernels::MatmulPrecision::int8}) {
      if (p != kernels::MatmulPrecision::fp32 && !kernels::dnnl_cpu_info().bf16_native()) continue;
      SCOPED_TRACE(std::string(kernels::precision_name(p)) + " " + std::to_string(bad));
      try {
        io::load_gpt2(dir, p);
        ADD_FAILURE() << "loaded";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(weights + ": tensor 'h.1.mlp.c_fc.weight' holds "), std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find(" at element 37"), std::string::npos) << e.what();
      }
    }
  }
  safetensors::save(weights, tensors);
  EXPECT_NO_THROW(io::load_gpt2(dir));
  fs::remove_all(dir);
}
