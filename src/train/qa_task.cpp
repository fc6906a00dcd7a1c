// Fine-tuning BERT for extractive QA (qkv/train/qa_task.h).
#include "qkv/train/qa_task.h"

#include <algorithm>

#include "qkv/ops/shape.h"

namespace qkv::train {

QaFeature qa_feature(const text::QaWindow& w) { return {w.ids, w.type_ids, w.start, w.end}; }

QaBatch make_qa_batch(const std::vector<const QaFeature*>& rows, int64_t pad_id, bool with_targets) {
  QKV_CHECK(!rows.empty(), "make_qa_batch", "no rows");
  const int64_t B = int64_t(rows.size());
  int64_t T = 0;
  for (auto* r : rows) T = std::max<int64_t>(T, int64_t(r->ids.size()));
  std::vector<int64_t> ids(size_t(B * T), pad_id), types(size_t(B * T), 0);  // (B, T)
  std::vector<int64_t> start(static_cast<size_t>(B)), end(static_cast<size_t>(B));  // (B)
  std::vector<uint8_t> pad(size_t(B * T), 1);
  bool any_pad = false;
  for (int64_t i = 0; i < B; ++i) {
    const QaFeature& f = *rows[size_t(i)];
    const int64_t n = int64_t(f.ids.size());
    std::copy(f.ids.begin(), f.ids.end(), ids.begin() + i * T);
    std::copy(f.type_ids.begin(), f.type_ids.end(), types.begin() + i * T);
    std::fill(pad.begin() + i * T, pad.begin() + i * T + n, uint8_t(0));
    any_pad |= n < T;
    start[size_t(i)] = f.start;
    end[size_t(i)] = f.end;
  }
  QaBatch b;
  b.ids = Tensor::from_vector(ids, {B, T});
  b.type_ids = Tensor::from_vector(types, {B, T});
  if (any_pad) b.key_pad = Tensor::from_vector(pad, {B, T});
  if (with_targets) {
    b.start = Tensor::from_vector(start, {B});
    b.end = Tensor::from_vector(end, {B});
  }
  return b;
}

QaFeatureStream::QaFeatureStream(std::vector<QaFeature> features, int64_t batch_size, int64_t pad_id, uint64_t seed)
    : features_(std::move(features)), pad_id_(pad_id) {
  QKV_CHECK(!features_.empty(), "QA stream", "no training windows");
  QKV_CHECK(batch_size > 0, "QA stream", "batch_size must be positive, got ", batch_size);
  // Every token, segment id and target: a resume then refuses a corpus edited in place.
  LengthPlan p = fingerprinted_length_plan(features_, batch_size, seed, [](PlanHash& h, const QaFeature& f) {
    h.mix(f.ids.size());
    for (int32_t v : f.ids) h.mix(uint64_t(uint32_t(v)));
    for (int32_t v : f.type_ids) h.mix(uint64_t(uint32_t(v)));
    h.mix(uint64_t(f.start));
    h.mix(uint64_t(f.end));
  });
  plan_ = std::move(p.batches);
  order_.emplace(plan_.size(), seed, p.fingerprint, "QA stream");
}

QaBatch QaFeatureStream::batch(size_t i) const {
  std::vector<const QaFeature*> rows;
  for (size_t f : plan_[i]) rows.push_back(&features_[f]);
  return make_qa_batch(rows, pad_id_);
}

TrainingTask::MicroBatch BertQaTask::next() {
  QaBatch b = data_.next();
  MicroBatch m;
  m.units = b.ids.size(0);
  m.summed_loss = [this, b](double) {
    auto logits = model_.forward(b.ids, b.type_ids, b.key_pad);
    return models::BertForQuestionAnswering::loss(logits, b.start, b.end, Reduction::sum);
  };
  m.row_units.assign(size_t(m.units), 1);  // the loss sums one term per window
  m.rows_loss = [this, b](double, int64_t begin, int64_t end) {
    auto rows = [&](const Tensor& x) { return x.defined() ? slice(x, 0, begin, end).contiguous() : x; };
    auto logits = model_.forward(rows(b.ids), rows(b.type_ids), rows(b.key_pad));
    return models::BertForQuestionAnswering::loss(logits, rows(b.start), rows(b.end), Reduction::sum);
  };
  return m;
}

}  // namespace qkv::train
