#include "qkv/tasks/embedder.h"

#include <algorithm>
#include <cmath>
#include <numeric>

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

Embedder::Embedder(const std::string& model_dir) : Embedder(io::load_bert(model_dir, io::BertHeads{false, false})) {}

Embedder::Embedder(io::BertBundle bundle) : bundle_(std::move(bundle)) {
  QKV_CHECK(bundle_.bert != nullptr, "Embedder", "needs a BERT model");
  QKV_CHECK(bundle_.tokenizer != nullptr, "Embedder", "the model directory has no tokenizer (tokenizer.json or vocab.txt)");
}

std::vector<SentenceEmbedding> Embedder::embed(const std::vector<ClsInput>& inputs, const EmbedOptions& opt) const {
  QKV_CHECK(opt.batch_size > 0, "embed", "batch_size must be positive, got ", opt.batch_size);
  kernels::check_precision_supported(
      opt.precision, (std::string("embed (precision ") + kernels::precision_name(opt.precision) + ")").c_str());
  const models::BertConfig& cfg = bundle_.config;
  std::vector<SentenceEmbedding> out(inputs.size());
  std::vector<train::ClsExample> rows(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    rows[i] = bert_input(*bundle_.tokenizer, inputs[i], cfg.max_position_embeddings, &out[i].truncated);
  std::vector<size_t> order(inputs.size());  // by length: batches with little padding
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return rows[x].ids.size() < rows[y].ids.size(); });

  models::Bert& model = *bundle_.bert;
  const nn::EvalScope eval_mode(model);
  NoGradGuard ng;
  kernels::MatmulPrecisionScope precision(opt.precision);
  const int64_t D = cfg.hidden_size;
  for (size_t s = 0; s < order.size(); s += size_t(opt.batch_size)) {
    const size_t e = std::min(order.size(), s + size_t(opt.batch_size));
    const int64_t B = int64_t(e - s), T = int64_t(rows[order[e - 1]].ids.size());  // the longest row last
    std::vector<int64_t> ids(size_t(B * T), cfg.pad_token_id), types(size_t(B * T), 0);
    std::vector<uint8_t> pad(size_t(B * T), 1);
    for (int64_t r = 0; r < B; ++r) {
      const train::ClsExample& row = rows[order[s + size_t(r)]];
      std::copy(row.ids.begin(), row.ids.end(), ids.begin() + r * T);
      std::copy(row.types.begin(), row.types.end(), types.begin() + r * T);
      std::fill_n(pad.begin() + r * T, row.ids.size(), uint8_t(0));
    }
    Tensor h = model.hidden(Tensor::from_vector(ids, {B, T}), Tensor::from_vector(types, {B, T}),
                            Tensor::from_vector(pad, {B, T}))
                   .contiguous();  // (B, T, D)
    const float* hp = h.data<float>();
    for (int64_t r = 0; r < B; ++r) {
      const int64_t n = int64_t(rows[order[s + size_t(r)]].ids.size());  // real tokens of this row
      std::vector<double> v(size_t(D), 0.0);
      if (opt.pooling == Pooling::cls) {
        for (int64_t d = 0; d < D; ++d) v[size_t(d)] = hp[r * T * D + d];
      } else {
        for (int64_t t = 0; t < n; ++t)
          for (int64_t d = 0; d < D; ++d) v[size_t(d)] += hp[(r * T + t) * D + d];
        for (auto& x : v) x /= double(n);
      }
      if (opt.normalize) {
        double sq = 0;
        for (double x : v) sq += x * x;
        const double norm = std::max(std::sqrt(sq), 1e-12);
        for (auto& x : v) x /= norm;
      }
      out[order[s + size_t(r)]].vector.assign(v.begin(), v.end());
    }
  }
  return out;
}

}  // namespace qkv::tasks
