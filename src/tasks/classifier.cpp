#include "qkv/tasks/classifier.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "qkv/autograd/node.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace qkv::tasks {

ClassifierFamily classifier_family(const std::string& model_dir) {
  const std::string path = (fs::path(model_dir) / "config.json").string();
  QKV_CHECK(fs::exists(path), model_dir, "not a classifier model directory: config.json is missing");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail(path, "not valid JSON: ", e.what());
  }
  QKV_CHECK(j.is_object(), path, "expected a JSON object");
  if (j.contains("model_type") && j["model_type"].is_string()) {
    const std::string t = j["model_type"];
    if (t == "bert") return ClassifierFamily::bert;
    if (t == "gpt2" || t == "openai-gpt") return ClassifierFamily::gpt;
    fail(path, "field 'model_type': \"", t, "\" is not a classifier qkv reads (expected \"gpt2\" or \"bert\")");
  }
  if (j.contains("architectures") && j["architectures"].is_array())
    for (auto& a : j["architectures"]) {
      const std::string n = a.is_string() ? a.get<std::string>() : "";
      if (n.rfind("Bert", 0) == 0) return ClassifierFamily::bert;
      if (n.rfind("GPT2", 0) == 0 || n.rfind("OpenAIGPT", 0) == 0) return ClassifierFamily::gpt;
    }
  fail(path, "fields 'model_type' / 'architectures': expected a GPT-2 (\"gpt2\") or BERT (\"bert\") classifier");
}

Classifier::Classifier(const std::string& model_dir, kernels::MatmulPrecision precision) {
  if (classifier_family(model_dir) == ClassifierFamily::bert) {
    bert_ = std::make_shared<io::BertClassifierBundle>(io::load_bert_classifier(model_dir, precision));
    bert_->model->eval();
  } else {
    gpt_ = std::make_shared<io::GptClassifierBundle>(io::load_gpt2_classifier(model_dir, precision));
    gpt_->model->eval();
  }
}

Classifier::Classifier(io::GptClassifierBundle bundle)
    : gpt_(std::make_shared<io::GptClassifierBundle>(std::move(bundle))) {
  QKV_CHECK(gpt_->model && gpt_->tokenizer, "Classifier", "needs a model and its tokenizer");
  if (gpt_->max_len <= 0) gpt_->max_len = gpt_->model->transformer->config().n_positions;
}

Classifier::Classifier(io::BertClassifierBundle bundle)
    : bert_(std::make_shared<io::BertClassifierBundle>(std::move(bundle))) {
  QKV_CHECK(bert_->model && bert_->tokenizer, "Classifier", "needs a model and its tokenizer");
  if (bert_->max_len <= 0) bert_->max_len = bert_->model->bert->config().max_position_embeddings;
}

void Classifier::hold_weights_in_bf16() {
  if (bert_) bert_->model->hold_weights_in_bf16();
  else gpt_->model->hold_weights_in_bf16();
}

void Classifier::hold_weights_in_int8() {
  if (bert_) bert_->model->hold_weights_in_int8();
  else gpt_->model->hold_weights_in_int8();
}

const std::vector<std::string>& Classifier::labels() const { return bert_ ? bert_->labels : gpt_->labels; }
bool Classifier::pairs() const { return bert_ ? bert_->pairs : gpt_->pairs; }
bool Classifier::accepts(bool pair) const {
  if (bert_ && !bert_->pairs_declared) return true;
  return pair == pairs();
}
int64_t Classifier::max_len() const { return bert_ ? bert_->max_len : gpt_->max_len; }

nn::Module& Classifier::module() const {
  if (bert_) return *bert_->model;
  return *gpt_->model;
}

void Classifier::save(const std::string& dir) const {
  if (bert_) io::save_bert_classifier(dir, *bert_);
  else io::save_gpt2_classifier(dir, *gpt_);
}

train::ClsExample Classifier::encode(const ClsInput& x, bool* truncated) const {
  const std::string_view b = x.b;
  if (bert_) return train::encode_bert_cls_input(*bert_->tokenizer, x.a, x.pair ? &b : nullptr, bert_->max_len, truncated);
  train::ClsExample e;
  e.ids = train::encode_cls_input(*gpt_->tokenizer, train::ClsTokens::of(*gpt_->tokenizer), x.a, x.pair ? &b : nullptr,
                                  gpt_->max_len, truncated);
  return e;
}

Tensor Classifier::logits(const train::ClsBatch& b) const {
  if (bert_) return bert_->model->forward(b.ids, b.token_type_ids, b.key_pad);
  return gpt_->model->forward(b.ids, b.key_pad, b.extract_pos);
}

std::vector<Classification> Classifier::classify(const std::vector<ClsInput>& inputs, const ClassifyOptions& opt) const {
  QKV_CHECK(opt.batch_size > 0, "classify", "batch_size must be positive, got ", opt.batch_size);
  kernels::check_task_precision(opt.precision, "classify");
  std::vector<Classification> out(inputs.size());
  std::vector<train::ClsExample> ex(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ClsInput& x = inputs[i];
    QKV_CHECK(accepts(x.pair), "classify", "input ", i + 1, ": the model classifies ",
              pairs() ? "pairs of texts (a<TAB>b)" : "single texts", ", got ", x.pair ? "a pair" : "a single text");
    ex[i] = encode(x, &out[i].truncated);
  }
  std::vector<size_t> order(inputs.size());  // by length: little padding in GPT's batches
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return ex[x].ids.size() < ex[y].ids.size(); });

  nn::Module& model = module();
  const nn::EvalScope eval_mode(model);
  NoGradGuard ng;
  kernels::MatmulPrecisionScope precision(opt.precision);
  const int64_t C = int64_t(labels().size());
  for (size_t s = 0; s < order.size(); s += size_t(opt.batch_size)) {
    std::vector<const train::ClsExample*> rows;
    const size_t e = std::min(order.size(), s + size_t(opt.batch_size));
    for (size_t k = s; k < e; ++k) rows.push_back(&ex[order[k]]);
    Tensor lg_t;  // (B, C); BERT reads the rows packed without padding, GPT a right-padded batch
    if (bert_) {
      models::PackedSequences p;
      for (const train::ClsExample* r : rows) p.add(r->ids, r->types);
      lg_t = bert_->model->forward_packed(p.ids(), p.token_types(), p.lengths()).contiguous();
    } else {
      lg_t = logits(train::make_cls_batch(rows)).contiguous();
    }
    const float* lg = lg_t.data<float>();
    for (size_t r = 0; r < rows.size(); ++r) {
      const float* row = lg + int64_t(r) * C;
      int64_t best = 0;
      for (int64_t c = 1; c < C; ++c)
        if (row[c] > row[best]) best = c;
      double z = 0;  // softmax in double: exp(l - max) / sum
      for (int64_t c = 0; c < C; ++c) z += std::exp(double(row[c]) - double(row[best]));
      Classification& o = out[order[s + r]];
      o.label_id = best;
      o.label = labels()[size_t(best)];
      o.probability = 1.0 / z;
      if (opt.all_probabilities) {
        o.probabilities.resize(size_t(C));
        for (int64_t c = 0; c < C; ++c) o.probabilities[size_t(c)] = std::exp(double(row[c]) - double(row[best])) / z;
      }
    }
  }
  return out;
}

}  // namespace qkv::tasks
