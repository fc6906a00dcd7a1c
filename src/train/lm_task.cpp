#include "qkv/train/lm_task.h"

#include "qkv/autograd/node.h"
#include "qkv/ops/loss.h"
#include "qkv/ops/shape.h"

namespace qkv::train {

PackedLmStream::PackedLmStream(const std::vector<std::vector<int64_t>>& documents, int64_t context,
                               int64_t batch_size, uint64_t seed)
    : context_(context), batch_(batch_size) {
  QKV_CHECK(context > 0 && batch_size > 0, "PackedLmStream", "context and batch_size must be positive, got ", context,
            " and ", batch_size);
  for (const auto& d : documents) stream_.insert(stream_.end(), d.begin(), d.end());
  windows_ = stream_.size() > size_t(context) ? int64_t(stream_.size() - 1) / context : 0;
  QKV_CHECK(windows_ > 0, "PackedLmStream", "the corpus has ", stream_.size(), " tokens: fewer than one window of ",
            context + 1);
  PlanHash h;  // the window length, batch size and every token identify the plan
  h.mix(uint64_t(context));
  h.mix(uint64_t(batch_size));
  h.mix(stream_.size());
  for (int64_t t : stream_) h.mix(uint64_t(t));
  order_.emplace(size_t(batches_per_epoch()), seed, h.value(), "PackedLmStream");
}

LmBatch PackedLmStream::batch(size_t b) const {
  const int64_t first = int64_t(b) * batch_, B = std::min(batch_, windows_ - first), T = context_;
  LmBatch out;
  out.ids = Tensor::empty({B, T}, DType::i64);       // (B, T)
  out.targets = Tensor::empty({B, T}, DType::i64);   // (B, T)
  int64_t* ids = out.ids.data<int64_t>();
  int64_t* tgt = out.targets.data<int64_t>();
  for (int64_t r = 0; r < B; ++r) {
    const int64_t* w = stream_.data() + (first + r) * T;  // w[0 .. T]
    std::copy(w, w + T, ids + r * T);
    std::copy(w + 1, w + T + 1, tgt + r * T);
  }
  out.tokens = B * T;
  return out;
}

LmBatch PackedLmStream::next() { return batch(order_->next()); }

std::vector<LmBatch> PackedLmStream::all_batches() const {
  std::vector<LmBatch> out;
  for (int64_t b = 0; b < batches_per_epoch(); ++b) out.push_back(batch(size_t(b)));
  return out;
}

Tensor LmTask::summed_loss(const models::Gpt& model, const LmBatch& b, double ls) {
  return model.lm_loss(b.ids, b.targets, ls, Reduction::sum, b.key_pad);  // no (B, T, V) logits kept
}

TrainingTask::MicroBatch LmTask::next() {
  LmBatch b = data_.next();
  MicroBatch m;
  m.units = b.tokens;
  m.summed_loss = [this, b](double ls) { return summed_loss(model_, b, ls); };
  const int64_t B = b.targets.size(0), T = b.targets.size(1);
  const int64_t* y = b.targets.data<int64_t>();
  m.row_units.assign(size_t(B), 0);  // the targets that count, per row
  for (int64_t r = 0; r < B; ++r)
    for (int64_t t = 0; t < T; ++t) m.row_units[size_t(r)] += y[r * T + t] != -100;
  m.rows_loss = [this, b](double ls, int64_t begin, int64_t end) {
    auto rows = [&](const Tensor& x) { return x.defined() ? slice(x, 0, begin, end).contiguous() : x; };
    LmBatch part;
    part.ids = rows(b.ids);          // (end - begin, T)
    part.targets = rows(b.targets);  // (end - begin, T)
    part.key_pad = rows(b.key_pad);  // (end - begin, T) or undefined
    return summed_loss(model_, part, ls);
  };
  return m;
}

double LmTask::evaluate_nll(models::Gpt& model, const std::vector<LmBatch>& batches) {
  NoGradGuard ng;
  const nn::EvalScope eval_mode(model);
  double total = 0;
  int64_t tokens = 0;
  for (const LmBatch& b : batches) {
    total += summed_loss(model, b).item();
    tokens += b.tokens;
  }
  return tokens ? total / double(tokens) : 0.0;
}

NllSum strided_nll(models::Gpt& model, const std::vector<int64_t>& ids, int64_t context, int64_t stride) {
  QKV_CHECK(context >= 2 && context <= model.config().n_positions, "perplexity", "context must be in [2, n_positions=",
            model.config().n_positions, "], got ", context);
  QKV_CHECK(stride >= 1 && stride <= context, "perplexity", "stride must be in [1, context=", context, "], got ", stride);
  QKV_CHECK(ids.size() >= 2, "perplexity", "the text has ", ids.size(), " tokens: at least 2 are needed");
  NoGradGuard ng;
  const nn::EvalScope eval_mode(model);
  NllSum r;
  const int64_t n = int64_t(ids.size());
  int64_t prev_end = 1;  // tokens before this are scored (the first token never is)
  for (int64_t begin = 0;; begin += stride) {
    const int64_t end = std::min(begin + context, n), len = end - begin;
    Tensor w = Tensor::from_vector(std::vector<int64_t>(ids.begin() + begin, ids.begin() + end), {1, len});
    std::vector<int64_t> tgt(size_t(len), -100);  // position j predicts token begin + j + 1
    for (int64_t i = std::max(prev_end, begin + 1); i < end; ++i) tgt[size_t(i - 1 - begin)] = ids[size_t(i)];
    r.tokens += end - std::max(prev_end, begin + 1);
    Tensor targets = Tensor::from_vector(tgt, {1, len});
    r.total += cross_entropy(model.forward(w), targets, -100, 0.0, Reduction::sum).item();
    prev_end = end;
    if (end == n) break;
  }
  return r;
}

}  // namespace qkv::train
