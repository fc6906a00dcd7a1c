#include "qkv/train/cls_task.h"

#include "qkv/ops/elementwise.h"
#include "qkv/ops/loss.h"
#include "qkv/ops/shape.h"

namespace qkv::train {
namespace {

// The auxiliary LM loss of hidden states h (B, T, D): positions 0 .. T-2 predict lm_targets (B, T-1).
Tensor lm_head_loss(const models::GptClassifier& model, const Tensor& h, const Tensor& lm_targets, Reduction r) {
  return model.transformer->head_loss(slice(h, 1, 0, h.size(1) - 1), lm_targets, 0.0, r);
}

}  // namespace

Tensor GptClassificationTask::summed_loss(const models::GptClassifier& model, const ClsBatch& b, double lm_weight,
                                          double ls) {
  const bool aux = lm_weight > 0;
  Tensor h;
  Tensor cls = model.forward(b.ids, b.key_pad, b.extract_pos, aux ? &h : nullptr);  // (B, C)
  Tensor loss = cross_entropy(cls, b.labels, -100, ls, Reduction::sum);
  if (!aux) return loss;
  Tensor lm = lm_head_loss(model, h, b.lm_targets, Reduction::mean);
  return add(loss, mul(lm, lm_weight * double(b.ids.size(0))));
}

Tensor BertClassificationTask::summed_loss(const models::BertForSequenceClassification& model, const ClsBatch& b,
                                           double ls) {
  Tensor logits = model.forward(b.ids, b.token_type_ids, b.key_pad);  // (B, C)
  return cross_entropy(logits, b.labels, -100, ls, Reduction::sum);
}

TrainingTask::MicroBatch ClassificationTask::next() {
  ClsBatch b = data_.next();
  MicroBatch m;
  m.units = b.ids.size(0);
  m.summed_loss = [this, b](double ls) { return batch_loss(b, ls); };
  m.row_units.assign(size_t(m.units), 1);
  m.rows_loss = [this, b](double ls, int64_t begin, int64_t end) { return rows_loss(b, ls, begin, end); };
  return m;
}

ClsBatch cls_batch_rows(const ClsBatch& b, int64_t begin, int64_t end) {
  auto rows = [&](const Tensor& x) { return x.defined() ? slice(x, 0, begin, end).contiguous() : x; };
  return {rows(b.ids), rows(b.key_pad), rows(b.extract_pos), rows(b.labels), rows(b.lm_targets),
          rows(b.token_type_ids)};
}

Tensor ClassificationTask::rows_loss(const ClsBatch& b, double ls, int64_t begin, int64_t end) const {
  return batch_loss(cls_batch_rows(b, begin, end), ls);  // a plain sum over rows
}

// The auxiliary LM term is a mean over the whole batch's counted tokens times its B: rows
// [begin, end) contribute their summed token losses times B / (the batch's counted tokens).
Tensor GptClassificationTask::rows_loss(const ClsBatch& b, double ls, int64_t begin, int64_t end) const {
  if (lm_weight_ <= 0) return ClassificationTask::rows_loss(b, ls, begin, end);
  const ClsBatch part = cls_batch_rows(b, begin, end);
  Tensor h;
  Tensor cls = model_.forward(part.ids, part.key_pad, part.extract_pos, &h);  // (rows, C)
  Tensor loss = cross_entropy(cls, part.labels, -100, ls, Reduction::sum);
  int64_t counted = 0;
  const int64_t* t = b.lm_targets.data<int64_t>();
  for (int64_t i = 0; i < b.lm_targets.numel(); ++i) counted += t[i] != -100;
  Tensor lm = lm_head_loss(model_, h, part.lm_targets, Reduction::sum);
  const double scale = counted > 0 ? lm_weight_ * double(b.ids.size(0)) / double(counted) : 0.0;
  return add(loss, mul(lm, scale));
}

}  // namespace qkv::train
