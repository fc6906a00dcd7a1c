#include "qkv/tasks/embedder.h"

#include <algorithm>
#include <cmath>

#include "qkv/autograd/node.h"
#include "qkv/train/cls_stream.h"

namespace qkv::tasks {

namespace {

// [CLS] a [SEP] (b [SEP]) with its segments, cut to max_len tokens: classification's input
// (train/cls_stream.h), shared.
train::ClsExample bert_input(const text::Tokenizer& tok, const ClsInput& x, int64_t max_len, bool* truncated) {
  const std::string_view b = x.b;
  return train::encode_bert_cls_input(tok, x.a, x.pair ? &b : nullptr, max_len, truncated);
}

}  // namespace

Pooling parse_pooling(const std::string& name) {
  if (name == "cls") return Pooling::cls;
  if (name == "mean") return Pooling::mean;
  fail("pooling", "unknown pooling '", name, "' (expected cls or mean)");
}

namespace {

io::BertBundle with_tokenizer(io::BertBundle b, const std::string& model_dir) {
  QKV_CHECK(b.tokenizer != nullptr, model_dir, "has no tokenizer (tokenizer.json or vocab.txt): embedding text needs one");
  return b;
}

}  // namespace

Embedder::Embedder(const std::string& model_dir, kernels::MatmulPrecision precision)
    : Embedder(with_tokenizer(io::load_bert(model_dir, io::BertHeads{false, false}, {}, precision), model_dir)) {}

Embedder::Embedder(io::BertBundle bundle) : bundle_(std::move(bundle)) {
  QKV_CHECK(bundle_.bert != nullptr, "Embedder", "needs a BERT model");
  QKV_CHECK(bundle_.tokenizer != nullptr, "Embedder", "the model has no tokenizer (tokenizer.json or vocab.txt)");
}

std::vector<SentenceEmbedding> Embedder::embed(const std::vector<ClsInput>& inputs, const EmbedOptions& opt) const {
  QKV_CHECK(opt.batch_size > 0, "embed", "batch_size must be positive, got ", opt.batch_size);
  kernels::check_task_precision(opt.precision, "embed");
  const models::BertConfig& cfg = bundle_.config;
  std::vector<SentenceEmbedding> out(inputs.size());
  std::vector<train::ClsExample> rows(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    rows[i] = bert_input(*bundle_.tokenizer, inputs[i], cfg.max_position_embeddings, &out[i].truncated);

  models::Bert& model = *bundle_.bert;
  const nn::EvalScope eval_mode(model);
  NoGradGuard ng;
  kernels::MatmulPrecisionScope precision(opt.precision);
  const int64_t D = cfg.hidden_size;
  for (size_t s = 0; s < rows.size(); s += size_t(opt.batch_size)) {
    // The batch's rows end to end, no padding (Bert::hidden_packed): (1, N) ids -> (1, N, D).
    const size_t e = std::min(rows.size(), s + size_t(opt.batch_size));
    models::PackedSequences p;
    for (size_t i = s; i < e; ++i) p.add(rows[i].ids, rows[i].types);
    const Tensor h = model.hidden_packed(p.ids(), p.token_types(), p.lengths()).contiguous();
    for (size_t r = 0; r < p.lengths().size(); ++r) {
      const float* hp = h.data<float>() + p.start(r) * D;  // this row's (n, D) states
      const int64_t n = p.lengths()[r];
      std::vector<double> v(size_t(D), 0.0);
      if (opt.pooling == Pooling::cls) {
        for (int64_t d = 0; d < D; ++d) v[size_t(d)] = hp[d];
      } else {
        for (int64_t t = 0; t < n; ++t)
          for (int64_t d = 0; d < D; ++d) v[size_t(d)] += hp[t * D + d];
        for (auto& x : v) x /= double(n);
      }
      if (opt.normalize) {
        double sq = 0;
        for (double x : v) sq += x * x;
        const double norm = std::max(std::sqrt(sq), 1e-12);
        for (auto& x : v) x /= norm;
      }
      out[s + r].vector.assign(v.begin(), v.end());
    }
  }
  return out;
}

}  // namespace qkv::tasks
