#include "qkv/io/gpt2_cls.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "qkv/io/format/safetensors.h"
#include "qkv/io/format/safetensors_reader.h"
#include "qkv/io/gpt2.h"
#include "qkv/io/labels.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace qkv::io {

GptClassifierBundle load_gpt2_classifier(const std::string& dir, kernels::MatmulPrecision precision) {
  const fs::path d(dir);
  const std::string cfg_path = (d / "config.json").string(), weights = (d / "model.safetensors").string();
  QKV_CHECK(fs::exists(cfg_path), dir, "not a classifier model directory: config.json is missing");
  QKV_CHECK(fs::exists(weights), dir, "not a classifier model directory: model.safetensors is missing");
  QKV_CHECK(fs::exists(d / "tokenizer.json"), dir, "not a classifier model directory: tokenizer.json is missing");
  GptClassifierBundle b;
  models::GptConfig cfg;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(cfg_path));
    nlohmann::json gpt = j;
    if (gpt.is_object()) gpt.erase("qkv_classifier");
    cfg = gpt.get<models::GptConfig>();
  } catch (const nlohmann::json::exception& e) {
    fail(cfg_path, "not valid JSON: ", e.what());
  } catch (const Error& e) {
    fail(cfg_path, e.what());
  }
  b.labels = read_id2label(j, cfg_path, "a GPT classifier", 1);
  check_single_label(j, cfg_path);
  const QkvClassifierSection q = read_qkv_classifier(j, cfg_path, /*pooling_allowed=*/false);
  QKV_CHECK(q.max_len >= 0 && q.max_len <= cfg.n_positions, cfg_path, "field 'qkv_classifier.max_len': expected 0 (",
            "all of n_positions) to n_positions = ", cfg.n_positions, ", got ", q.max_len);
  b.pairs = q.pairs;
  b.max_len = q.max_len > 0 ? q.max_len : cfg.n_positions;

  // Read one tensor at a time into the model, as load_gpt2 does: the file is never held whole.
  const safetensors::Reader file(weights);
  std::map<std::string, std::string> body;  // published name -> name in the file
  const std::string prefix = "transformer.";
  for (const std::string& name : file.names()) {
    if (name.rfind(prefix, 0) == 0) body[name.substr(prefix.size())] = name;
    else QKV_CHECK(name == "score.weight", weights, "unexpected tensor '", name,
                   "': a classifier holds transformer.* and score.weight");
  }
  QKV_CHECK(file.contains("score.weight"), weights, "tensor 'score.weight' is missing");
  const Shape score = file.shape("score.weight");
  QKV_CHECK(score == Shape({int64_t(b.labels.size()), cfg.n_embd}) && file.dtype("score.weight") == DType::f32,
            weights, "tensor 'score.weight': expected F32 (", b.labels.size(), ", ", cfg.n_embd, ") for ",
            b.labels.size(), " labels in config.json, got ", dtype_name(file.dtype("score.weight")), score.str());
  auto gpt = read_gpt2_body(file, body, cfg, precision);
  b.model = std::make_shared<models::GptClassifier>(gpt, int64_t(b.labels.size()), default_generator(),
                                                    nn::init::Scheme::none);
  // The score head as the body (a head too small to pay for int8 stays f32).
  b.model->hold_weights(precision);
  nn::read_parameter(file, "score.weight", b.model->score->weight);
  b.tokenizer = text::load_tokenizer((d / "tokenizer.json").string());
  QKV_CHECK(b.tokenizer->vocab_size() <= cfg.vocab_size, dir, "tokenizer.json has ", b.tokenizer->vocab_size(),
            " tokens but the model's vocab_size is ", cfg.vocab_size);
  return b;
}

void save_gpt2_classifier(const std::string& dir, const GptClassifierBundle& b) {
  QKV_CHECK(b.model != nullptr && b.tokenizer != nullptr, "save_gpt2_classifier", "no model or tokenizer to save");
  QKV_CHECK(int64_t(b.labels.size()) == b.model->num_labels, "save_gpt2_classifier", "expected ",
            b.model->num_labels, " label names, got ", b.labels.size());
  fs::create_directories(dir);
  const fs::path d(dir);
  nlohmann::json cfg = b.model->transformer->config();
  cfg["architectures"] = {"GPT2ForSequenceClassification"};
  nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
  for (size_t i = 0; i < b.labels.size(); ++i) {
    id2label[std::to_string(i)] = b.labels[i];
    label2id[b.labels[i]] = i;
  }
  cfg["id2label"] = id2label;
  cfg["label2id"] = label2id;
  cfg["qkv_classifier"] = {{"pairs", b.pairs}, {"max_len", b.max_len}};
  if (auto pad = b.tokenizer->special_id(text::Role::Pad)) cfg["pad_token_id"] = *pad;
  write_file_atomic((d / "config.json").string(), cfg.dump(2) + "\n");
  std::map<std::string, Tensor> tensors;
  for (auto& [name, t] : qkv_to_gpt2(*b.model->transformer)) tensors["transformer." + name] = t;
  tensors["score.weight"] = b.model->score->weight;
  safetensors::save((d / "model.safetensors").string(), tensors, {{"format", "pt"}});
  b.tokenizer->save((d / "tokenizer.json").string());
}

}  // namespace qkv::io
