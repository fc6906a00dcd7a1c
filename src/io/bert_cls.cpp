#include "qkv/io/bert_cls.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "qkv/io/labels.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace qkv::io {

namespace {

// The classifier's input length: spec.max_len, or the position table's when 0. Longer than the
// table is an error (it used to be cut to the table without a word).
int64_t classifier_max_len(const BertClassifierSpec& spec, const models::BertConfig& cfg, const std::string& where) {
  const int64_t P = cfg.max_position_embeddings;
  QKV_CHECK(spec.max_len >= 0 && spec.max_len <= P, where, "the classifier's max_len ", spec.max_len,
            " (data.max_len of a training config, qkv_classifier.max_len of a model directory): expected 1 to ",
            "max_position_embeddings = ", P, ", or 0 for all of them");
  return spec.max_len > 0 ? spec.max_len : P;
}

nlohmann::json read_config_json(const std::string& dir, std::string* path) {
  *path = (fs::path(dir) / "config.json").string();
  QKV_CHECK(fs::exists(*path), dir, "not a BERT model directory: config.json is missing");
  try {
    nlohmann::json j = nlohmann::json::parse(read_file(*path));
    QKV_CHECK(j.is_object(), *path, "expected a JSON object");
    return j;
  } catch (const nlohmann::json::exception& e) {
    fail(*path, "not valid JSON: ", e.what());
  }
}

models::BertConfig bert_config(const nlohmann::json& j, const std::string& path) {
  try {
    return j.get<models::BertConfig>();
  } catch (const nlohmann::json::exception& e) {
    fail(path, e.what());
  } catch (const Error& e) {
    fail(path, e.what());
  }
}

// The classifier head's dropout: the spec's, else config.json's classifier_dropout (a number or
// null), else -1 (hidden_dropout_prob).
double dropout_of(const BertClassifierSpec& spec, const nlohmann::json& j, const std::string& path) {
  if (spec.classifier_dropout >= 0) return spec.classifier_dropout;
  if (!j.contains("classifier_dropout") || j["classifier_dropout"].is_null()) return -1;
  const auto& v = j["classifier_dropout"];
  QKV_CHECK(v.is_number() && v.get<double>() >= 0 && v.get<double>() < 1, path,
            "field 'classifier_dropout': expected a rate in [0, 1) or null, got ", v.dump());
  return v.get<double>();
}

BertClassifierBundle load_with_head(const std::string& dir, const BertClassifierSpec& spec, const nlohmann::json& j,
                                    const std::string& cfg_path,
                                    kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32) {
  QKV_CHECK(spec.labels.size() >= 2, "load_bert_classifier", "a classifier needs at least 2 labels, got ",
            spec.labels.size());
  const models::BertConfig cfg = bert_config(j, cfg_path);
  auto head = std::make_shared<nn::Linear>(cfg.hidden_size, int64_t(spec.labels.size()), true, nn::init::Scheme::none);
  nn::initialize(*head, nn::init::Scheme::normal_002);  // kept when the file has no classifier.*
  BertBundle b = load_bert(dir, BertHeads{false, false}, {{"classifier", head}}, precision);
  QKV_CHECK(b.tokenizer != nullptr, dir, "has no tokenizer (tokenizer.json or vocab.txt): a classifier needs one");
  BertClassifierBundle out;
  out.model = std::make_shared<models::BertForSequenceClassification>(
      b.bert, int64_t(spec.labels.size()), dropout_of(spec, j, cfg_path), spec.pooling, head);
  out.model->eval();
  out.labels = spec.labels;
  out.tokenizer = b.tokenizer;
  out.pairs = spec.pairs;
  out.max_len = classifier_max_len(spec, cfg, cfg_path);
  out.report = std::move(b.report);
  return out;
}

}  // namespace

BertClassifierBundle load_bert_for_classification(const std::string& dir, const BertClassifierSpec& spec) {
  std::string path;
  const nlohmann::json j = read_config_json(dir, &path);
  return load_with_head(dir, spec, j, path);
}

BertClassifierBundle load_bert_classifier(const std::string& dir, kernels::MatmulPrecision precision) {
  std::string path;
  const nlohmann::json j = read_config_json(dir, &path);
  BertClassifierSpec spec;
  spec.labels = read_id2label(j, path, "a sequence classifier", 2);
  check_single_label(j, path);
  if (j.contains("num_labels"))
    QKV_CHECK(j["num_labels"] == nlohmann::json(spec.labels.size()), path, "field 'num_labels': ",
              j["num_labels"].dump(), " but 'id2label' names ", spec.labels.size(), " labels");
  const QkvClassifierSection q = read_qkv_classifier(j, path, /*pooling_allowed=*/true);
  spec.pairs = q.pairs;
  spec.max_len = q.max_len;
  if (q.pooling) {
    try {
      spec.pooling = models::parse_bert_cls_pooling(*q.pooling);
    } catch (const Error& e) {
      fail(path, "field 'qkv_classifier.pooling': ", e.what());
    }
  }
  BertClassifierBundle b = load_with_head(dir, spec, j, path, precision);
  b.pairs_declared = q.pairs_declared;
  // A fine-tuned classifier has every tensor; the pooler is needed unless pooling is mean.
  for (const std::string& n : b.report.initialised)
    QKV_CHECK(spec.pooling == models::BertClsPooling::mean && n.rfind("bert.pooler.", 0) == 0,
              (fs::path(dir) / "model.safetensors").string(), "tensor '", n,
              "' is missing: a fine-tuned classifier directory has the encoder, the pooler and classifier.*");
  return b;
}

BertClassifierBundle make_bert_classifier(const models::BertConfig& cfg, const BertClassifierSpec& spec,
                                          std::shared_ptr<text::Tokenizer> tokenizer) {
  QKV_CHECK(tokenizer != nullptr, "make_bert_classifier", "needs a tokenizer");
  BertBundle bb = make_bert(cfg, {false, false});
  BertClassifierBundle b;
  b.model = std::make_shared<models::BertForSequenceClassification>(bb.bert, int64_t(spec.labels.size()),
                                                                    spec.classifier_dropout, spec.pooling);
  b.labels = spec.labels;
  b.tokenizer = std::move(tokenizer);
  b.pairs = spec.pairs;
  b.max_len = classifier_max_len(spec, cfg, "make_bert_classifier");
  return b;
}

void save_bert_classifier(const std::string& dir, const BertClassifierBundle& b) {
  QKV_CHECK(b.model != nullptr && b.tokenizer != nullptr, "save_bert_classifier", "no model or tokenizer to save");
  QKV_CHECK(int64_t(b.labels.size()) == b.model->num_labels, "save_bert_classifier", "expected ",
            b.model->num_labels, " label names, got ", b.labels.size());
  BertBundle bb;
  bb.config = b.model->bert->config();
  bb.bert = b.model->bert;
  bb.tokenizer = b.tokenizer;
  bb.task_heads = {{"classifier", b.model->classifier}};
  nlohmann::json& x = bb.config_extra;
  const bool hf = b.model->pooling == models::BertClsPooling::pooler;  // Hugging Face computes it alike
  x["architectures"] = hf ? nlohmann::json::array({"BertForSequenceClassification"}) : nlohmann::json::array();
  nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
  for (size_t i = 0; i < b.labels.size(); ++i) {
    id2label[std::to_string(i)] = b.labels[i];
    label2id[b.labels[i]] = i;
  }
  x["id2label"] = id2label;
  x["label2id"] = label2id;
  x["classifier_dropout"] = b.model->dropout->p;
  x["problem_type"] = "single_label_classification";
  x["qkv_classifier"] = {{"pairs", b.pairs}, {"max_len", b.max_len},
                         {"pooling", models::bert_cls_pooling_name(b.model->pooling)}};
  save_bert(dir, bb);
}

}  // namespace qkv::io
