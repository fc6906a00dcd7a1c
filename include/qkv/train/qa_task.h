// qkv/train/qa_task.h - fine-tuning BertForQuestionAnswering (models/bert_qa.h) on windows of
// (question, context) (text/qa_features.h): every window of every training example is one row,
// its targets the answer's first and last positions, or [CLS] (0) where the answer is not wholly
// inside (the BERT SQuAD recipe).
//
// A micro-batch's summed loss is the sum over rows of (CE(start) + CE(end)) / 2 (units = rows),
// so the Trainer's sum / units is Hugging Face's mean loss.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "qkv/models/bert_qa.h"
#include "qkv/text/qa_features.h"
#include "qkv/train/batch_order.h"
#include "qkv/train/trainer.h"

namespace qkv::train {

struct QaFeature {
  std::vector<int32_t> ids, type_ids;  // [CLS] q [SEP] context part [SEP]
  int64_t start = 0, end = 0;          // target positions
};

struct QaBatch {
  Tensor ids, type_ids;  // (B, T) i64
  Tensor key_pad;        // (B, T) u8, 1 = padding (undefined when no row is padded)
  Tensor start, end;     // (B) i64 (undefined when the features carry no targets)
};

// Right-padded with pad_id; targets included when with_targets.
QaBatch make_qa_batch(const std::vector<const QaFeature*>& rows, int64_t pad_id, bool with_targets = true);
QaFeature qa_feature(const text::QaWindow& w);

// Features sorted by length (stable), cut into batches of batch_size, visited in a seeded
// BatchOrder (epoch shuffles, exact resume).
class QaFeatureStream {
 public:
  QaFeatureStream(std::vector<QaFeature> features, int64_t batch_size, int64_t pad_id, uint64_t seed);
  QaBatch next() { return batch(order_->next()); }
  int64_t epoch() const { return order_->epoch(); }
  std::map<std::string, int64_t> position() const { return order_->position(); }
  void restore(const std::map<std::string, int64_t>& pos) { order_->restore(pos); }
  size_t batches() const { return plan_.size(); }
  size_t features() const { return features_.size(); }

 private:
  QaBatch batch(size_t i) const;
  std::vector<QaFeature> features_;
  std::vector<std::vector<size_t>> plan_;  // batch -> feature indices
  int64_t pad_id_;
  std::optional<BatchOrder> order_;
};

class BertQaTask : public TrainingTask {
 public:
  BertQaTask(models::BertForQuestionAnswering& model, QaFeatureStream& data) : model_(model), data_(data) {}
  nn::Module& model() override { return model_; }
  MicroBatch next() override;  // units: windows
  const char* unit_name() const override { return "win"; }
  int64_t epoch() const override { return data_.epoch(); }
  std::map<std::string, int64_t> position() const override { return data_.position(); }
  void restore(const std::map<std::string, int64_t>& position) override { data_.restore(position); }

 private:
  models::BertForQuestionAnswering& model_;
  QaFeatureStream& data_;
};

}  // namespace qkv::train
