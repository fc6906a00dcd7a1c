#include "qkv/train/cls_task.h"

#include "qkv/ops/elementwise.h"
#include "qkv/ops/loss.h"
#include "qkv/ops/shape.h"

namespace qkv::train {

Tensor GptClassificationTask::summed_loss(const models::GptClassifier& model, const ClsBatch& b, double lm_weight,
                                          double ls) {
  const bool aux = lm_weight > 0;
  Tensor lm_logits;
  Tensor cls = model.forward(b.ids, b.key_pad, b.extract_pos, aux ? &lm_logits : nullptr);  // (B, C)
  Tensor loss = cross_entropy(cls, b.labels, -100, ls, Reduction::sum);
  if (!aux) return loss;
  Tensor head = slice(lm_logits, 1, 0, lm_logits.size(1) - 1);  // (B, T-1, V): predicts tokens 1 .. T-1
  Tensor lm = cross_entropy(head, b.lm_targets, -100, 0.0, Reduction::mean);
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
  return m;
}

}  // namespace qkv::train
