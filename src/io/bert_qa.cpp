#include "qkv/io/bert_qa.h"

#include <algorithm>
#include <filesystem>

#include "qkv/autograd/node.h"
#include "qkv/io/format/safetensors.h"
#include "qkv/util/file.h"

namespace qkv::io {
namespace fs = std::filesystem;

namespace {

bool is_pooler(const std::string& published) { return published.rfind("bert.pooler.", 0) == 0; }

// An encoder-only bundle around the QA model's encoder: what io/bert.h names and saves.
BertBundle encoder_bundle(const BertQaBundle& b) {
  BertBundle e;
  e.config = b.config;
  e.bert = b.model->bert;
  return e;
}

}  // namespace

BertQaBundle make_bert_qa(const models::BertConfig& cfg, Generator& gen) {
  BertQaBundle b;
  b.config = cfg;
  b.model = std::make_shared<models::BertForQuestionAnswering>(std::make_shared<models::Bert>(cfg, gen), gen);
  return b;
}

std::map<std::string, Tensor> bert_qa_published_parameters(const BertQaBundle& b) {
  QKV_CHECK(b.model != nullptr, "bert_qa_published_parameters", "no model");
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : bert_published_parameters(encoder_bundle(b)))
    if (!is_pooler(name)) out[name] = t;
  out["qa_outputs.weight"] = b.model->qa_outputs->weight;
  out["qa_outputs.bias"] = b.model->qa_outputs->bias;
  return out;
}

BertQaBundle load_bert_qa(const std::string& dir, kernels::MatmulPrecision precision) {
  BertBundle enc = load_bert(dir, BertHeads{false, false}, {}, precision);  // checks the encoder's tensors and the config
  BertQaBundle b;
  b.config = enc.config;
  b.tokenizer = enc.tokenizer;
  b.model = std::make_shared<models::BertForQuestionAnswering>(enc.bert);
  BertLoadReport& r = b.report;
  // The pooler is not part of this model: a stored one is ignored, a missing one not reported.
  for (auto& n : enc.report.loaded) (is_pooler(n) ? r.ignored : r.loaded).push_back(n);
  for (auto& n : enc.report.initialised)
    if (!is_pooler(n)) r.initialised.push_back(n);
  const std::string weights = (fs::path(dir) / "model.safetensors").string();
  const safetensors::Contents file = safetensors::load(weights);
  std::map<std::string, Tensor> head;
  for (auto& [name, t] : b.model->qa_outputs->named_parameters()) {
    const std::string published = "qa_outputs." + name;
    auto it = file.tensors.find(published);
    if (it == file.tensors.end()) {
      r.initialised.push_back(published);
      continue;
    }
    QKV_CHECK(it->second.shape() == t.shape() && it->second.dtype() == DType::f32, weights, "tensor '", published,
              "': expected F32 ", t.shape().str(), " (2 x hidden_size of config.json), got ",
              dtype_name(it->second.dtype()), " ", it->second.shape().str());
    head[name] = it->second;
    r.loaded.push_back(published);
  }
  for (auto& n : enc.report.ignored)
    if (n.rfind("qa_outputs.", 0) != 0 || !file.tensors.count(n)) r.ignored.push_back(n);
  {
    NoGradGuard ng;
    b.model->qa_outputs->load_state_dict(head, /*strict=*/false, weights);
  }
  b.model->hold_weights(precision);  // the encoder's are held already: qa_outputs'

  std::sort(r.ignored.begin(), r.ignored.end());
  b.model->eval();
  return b;
}

void save_bert_qa(const std::string& dir, const BertQaBundle& b) {
  QKV_CHECK(b.model != nullptr, "save_bert_qa", "no model to save");
  fs::create_directories(dir);
  const fs::path d(dir);
  nlohmann::json config = b.model->bert->config();
  config["architectures"] = {"BertForQuestionAnswering"};
  write_file_atomic((d / "config.json").string(), config.dump(2) + "\n");
  NoGradGuard ng;
  std::map<std::string, Tensor> tensors;
  for (auto& [name, t] : bert_qa_published_parameters(b)) tensors[name] = t.detach().contiguous();
  safetensors::save((d / "model.safetensors").string(), tensors, {{"format", "pt"}});
  if (b.tokenizer) save_bert_tokenizer(dir, *b.tokenizer);
}

}  // namespace qkv::io
