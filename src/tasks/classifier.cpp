#include "qkv/tasks/classifier.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "qkv/autograd/node.h"
#include "qkv/train/cls_stream.h"

namespace qkv::tasks {

Classifier::Classifier(const std::string& model_dir) : Classifier(io::load_gpt2_classifier(model_dir)) {
  bundle_.model->eval();
}

Classifier::Classifier(io::GptClassifierBundle bundle) : bundle_(std::move(bundle)) {
  QKV_CHECK(bundle_.model && bundle_.tokenizer, "Classifier", "needs a model and its tokenizer");
  if (bundle_.max_len <= 0) bundle_.max_len = bundle_.model->transformer->config().n_positions;
}

std::vector<Classification> Classifier::classify(const std::vector<ClsInput>& inputs, const ClassifyOptions& opt) const {
  QKV_CHECK(opt.batch_size > 0, "classify", "batch_size must be positive, got ", opt.batch_size);
  const train::ClsTokens tokens = train::ClsTokens::of(*bundle_.tokenizer);
  std::vector<Classification> out(inputs.size());
  std::vector<train::ClsExample> ex(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ClsInput& x = inputs[i];
    QKV_CHECK(x.pair == bundle_.pairs, "classify", "input ", i + 1, ": the model classifies ",
              bundle_.pairs ? "pairs of texts (a<TAB>b)" : "single texts", ", got ", x.pair ? "a pair" : "a single text");
    std::string_view b = x.b;
    ex[i].ids = train::encode_cls_input(*bundle_.tokenizer, tokens, x.a, x.pair ? &b : nullptr, bundle_.max_len,
                                        &out[i].truncated);
  }
  std::vector<size_t> order(inputs.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return ex[x].ids.size() < ex[y].ids.size(); });

  models::GptClassifier& model = *bundle_.model;
  struct EvalMode {  // eval for the forward passes, the caller's mode afterwards (also on errors)
    models::GptClassifier& m;
    bool was = m.is_training();
    ~EvalMode() { m.train(was); }
  } mode{model};
  model.eval();
  NoGradGuard ng;
  const int64_t C = model.num_labels;
  for (size_t s = 0; s < order.size(); s += size_t(opt.batch_size)) {
    std::vector<const train::ClsExample*> rows;
    const size_t e = std::min(order.size(), s + size_t(opt.batch_size));
    for (size_t k = s; k < e; ++k) rows.push_back(&ex[order[k]]);
    train::ClsBatch b = train::make_cls_batch(rows);
    Tensor logits = model.forward(b.ids, b.key_pad, b.extract_pos).contiguous();  // (B, C)
    const float* lg = logits.data<float>();
    for (size_t r = 0; r < rows.size(); ++r) {
      const float* row = lg + int64_t(r) * C;
      int64_t best = 0;
      for (int64_t c = 1; c < C; ++c)
        if (row[c] > row[best]) best = c;
      double z = 0;  // softmax in double: exp(l - max) / sum
      for (int64_t c = 0; c < C; ++c) z += std::exp(double(row[c]) - double(row[best]));
      Classification& o = out[order[s + r]];
      o.label_id = best;
      o.label = bundle_.labels[size_t(best)];
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
