#include "qkv/io/bert_tagger.h"

#include <filesystem>

#include "qkv/autograd/node.h"
#include "qkv/io/format/safetensors.h"
#include "qkv/io/labels.h"
#include "qkv/util/file.h"

namespace qkv::io {
namespace fs = std::filesystem;

namespace {

const char* const kClassifier[] = {"classifier.weight", "classifier.bias"};

nlohmann::json read_config_json(const std::string& path) {
  try {
    return nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail(path, "not valid JSON: ", e.what());
  }
}

// The dropout before the classifier: classifier_dropout when set, else hidden_dropout_prob.
double classifier_dropout(const nlohmann::json& config, const models::BertConfig& cfg, const std::string& where) {
  auto it = config.find("classifier_dropout");
  if (it == config.end() || it->is_null()) return cfg.hidden_dropout_prob;
  QKV_CHECK(it->is_number() && it->get<double>() >= 0 && it->get<double>() < 1, where,
            "field 'classifier_dropout': expected a rate in [0, 1) or null, got ", it->dump());
  return it->get<double>();
}

// The encoder of dir (no pooler, no heads) and a new classifier over it.
BertTaggerBundle tagger_over(const std::string& dir, std::vector<std::string> labels, double dropout,
                             kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32) {
  BertBundle enc = load_bert(dir, BertHeads{false, false, false}, {}, precision);
  BertTaggerBundle t;
  t.config = enc.config;
  t.labels = std::move(labels);
  t.tokenizer = enc.tokenizer;
  t.report = enc.report;
  t.model = std::make_shared<models::BertForTokenClassification>(enc.bert, int64_t(t.labels.size()), dropout);
  return t;
}

}  // namespace

BertTaggerBundle make_bert_tagger(const models::BertConfig& cfg, std::vector<std::string> labels, Generator& gen) {
  BertTaggerBundle t;
  t.config = cfg;
  t.labels = std::move(labels);
  auto bert = std::make_shared<models::Bert>(cfg, gen, nn::init::Scheme::normal_002, /*add_pooling_layer=*/false);
  t.model = std::make_shared<models::BertForTokenClassification>(bert, int64_t(t.labels.size()),
                                                                 cfg.hidden_dropout_prob, gen);
  return t;
}

BertTaggerBundle bert_tagger_from_pretrained(const std::string& dir, std::vector<std::string> labels) {
  QKV_CHECK(!labels.empty(), dir, "a token classifier needs at least one label");
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  QKV_CHECK(fs::exists(cfg_path), cfg_path, "missing: a BERT model directory needs config.json");
  const nlohmann::json raw = read_config_json(cfg_path);
  BertTaggerBundle t = tagger_over(dir, std::move(labels), 0.0);
  t.model->dropout->p = classifier_dropout(raw, t.config, cfg_path);
  for (const char* n : kClassifier) t.report.initialised.push_back(n);
  return t;
}

namespace {

// A sentence classifier stores its head under the same names (classifier.weight, .bias, one row a
// label), so the weights cannot tell it from a token classifier: config.json does. Without this,
// `qkv tag` on a sentiment model tagged every word "pos" or "neg" and exited 0.
void check_token_classifier(const nlohmann::json& raw, const std::string& cfg_path) {
  const bool sentence = raw.contains("qkv_classifier") ||
                        (raw.contains("problem_type") && raw["problem_type"].is_string() &&
                         raw["problem_type"].get<std::string>().find("classification") != std::string::npos);
  std::string arch;
  if (raw.contains("architectures") && raw["architectures"].is_array() && !raw["architectures"].empty()) {
    arch = raw["architectures"][0].dump();
    for (const auto& a : raw["architectures"])
      if (a == "BertForTokenClassification") return;
  }
  const bool classifier = sentence || arch.find("SequenceClassification") != std::string::npos;
  QKV_CHECK(arch.empty() && !sentence, cfg_path, "holds a ", arch.empty() ? "sentence classifier" : arch,
            " model, not a token classifier (BertForTokenClassification)",
            classifier ? "; classify sentences with qkv classify" : "");
}

}  // namespace

BertTaggerBundle load_bert_tagger(const std::string& dir, kernels::MatmulPrecision precision) {
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  const std::string weights = (fs::path(dir) / "model.safetensors").string();
  QKV_CHECK(fs::exists(cfg_path), cfg_path, "missing: a BERT token classifier directory needs config.json");
  const nlohmann::json raw = read_config_json(cfg_path);
  check_token_classifier(raw, cfg_path);
  std::vector<std::string> labels = read_id2label(raw, cfg_path, "a token classifier", 1);
  BertTaggerBundle t = tagger_over(dir, std::move(labels), 0.0, precision);
  t.model->dropout->p = classifier_dropout(raw, t.config, cfg_path);
  // The classifier: reported "ignored" by load_bert (not a part it knows), loaded here.
  auto file = safetensors::load(weights).tensors;
  std::map<std::string, Tensor> sd;
  for (const char* n : kClassifier) {
    auto it = file.find(n);
    QKV_CHECK(it != file.end(), weights, "tensor '", n, "' is missing: not a BertForTokenClassification checkpoint");
    const std::string ours = std::string(n).substr(std::string("classifier.").size());
    const Tensor& param = ours == "weight" ? t.model->classifier->weight : t.model->classifier->bias;
    QKV_CHECK(it->second.shape() == param.shape(), weights, "tensor '", n, "': expected shape ", param.shape().str(),
              " (", t.labels.size(), " labels in id2label, hidden_size ", t.config.hidden_size, "), got ",
              it->second.shape().str());
    QKV_CHECK(it->second.dtype() == DType::f32, weights, "tensor '", n, "': expected F32, got ",
              dtype_name(it->second.dtype()));
    sd[ours] = it->second;
    std::erase(t.report.ignored, std::string(n));
    t.report.loaded.push_back(n);
  }
  NoGradGuard ng;
  t.model->classifier->load_state_dict(sd, /*strict=*/true, weights);
  t.model->hold_weights(precision);  // the encoder's are held already: the classifier's
  t.model->eval();
  return t;
}

std::map<std::string, Tensor> bert_tagger_published_parameters(const BertTaggerBundle& t) {
  QKV_CHECK(t.model != nullptr, "bert_tagger_published_parameters", "no model");
  BertBundle enc;
  enc.config = t.config;
  enc.bert = t.model->bert;
  std::map<std::string, Tensor> out = bert_published_parameters(enc);
  out["classifier.weight"] = t.model->classifier->weight;
  out["classifier.bias"] = t.model->classifier->bias;
  return out;
}

void save_bert_tagger(const std::string& dir, const BertTaggerBundle& t) {
  QKV_CHECK(t.model != nullptr, "save_bert_tagger", "no model to save");
  QKV_CHECK(int64_t(t.labels.size()) == t.model->num_labels(), "save_bert_tagger", t.labels.size(),
            " label names for a classifier of ", t.model->num_labels(), " labels");
  fs::create_directories(dir);
  const fs::path d(dir);
  nlohmann::json config = t.model->bert->config();
  config["architectures"] = {"BertForTokenClassification"};
  nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
  for (size_t i = 0; i < t.labels.size(); ++i) {
    id2label[std::to_string(i)] = t.labels[i];
    label2id[t.labels[i]] = i;
  }
  config["id2label"] = id2label;
  config["label2id"] = label2id;
  if (t.model->dropout->p != t.config.hidden_dropout_prob) config["classifier_dropout"] = t.model->dropout->p;
  write_file_atomic((d / "config.json").string(), config.dump(2) + "\n");
  NoGradGuard ng;
  std::map<std::string, Tensor> tensors;
  for (auto& [name, p] : bert_tagger_published_parameters(t)) tensors[name] = p.detach().contiguous();
  safetensors::save((d / "model.safetensors").string(), tensors, {{"format", "pt"}});
  if (t.tokenizer) save_bert_tokenizer(dir, *t.tokenizer);
}

}  // namespace qkv::io
