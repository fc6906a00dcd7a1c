// qkv/train/cls_task.h - fine-tuning a classifier: the batches, their stream, and the training
// task of each model family over one shared ClassificationTask.
//
// GPT (Radford et al. 2018, 3.3):
//   loss = mean over examples of CE(class | h at [EXTRACT])
//        + lm_weight * mean over counted tokens of CE(next token)     (the auxiliary LM loss)
// BERT (Devlin et al. 2019, 4.1; Hugging Face's BertForSequenceClassification):
//   loss = mean over examples of CE(class | classifier(dropout(pooled)))
//
// A micro-batch's summed loss is B times that (units = B examples), so the Trainer's
// sum / units gives exactly the per-batch loss above; with accumulation over micro-batches the
// LM term is averaged per micro-batch. GPT-1 used lm_weight 0.5; 0 turns the auxiliary loss off.
#pragma once
#include <map>
#include <string>

#include "qkv/models/bert_classifier.h"
#include "qkv/models/gpt.h"
#include "qkv/train/trainer.h"

namespace qkv::train {

struct ClsBatch {
  Tensor ids;             // (B, T) i64: [START] text [EXTRACT] (pad), or [CLS] a [SEP] (b [SEP]) (pad)
  Tensor key_pad;         // (B, T) u8, 1 = padding (or undefined)
  Tensor extract_pos;     // (B) i64: each row's last real token (GPT's [EXTRACT])
  Tensor labels;          // (B) i64
  Tensor lm_targets;      // (B, T - 1) i64: ids[:, 1:], -100 where the token or its input is padding
  Tensor token_type_ids;  // (B, T) i64 segments (BERT), or undefined
};

class ClsBatchStream {
 public:
  virtual ~ClsBatchStream() = default;
  virtual ClsBatch next() = 0;
  virtual int64_t epoch() const = 0;
  virtual std::map<std::string, int64_t> position() const = 0;
  virtual void restore(const std::map<std::string, int64_t>& position) = 0;
};

// A classifier trained on a ClsBatchStream; the family says what the loss of a batch is.
class ClassificationTask : public TrainingTask {
 public:
  ClassificationTask(nn::Module& model, ClsBatchStream& data) : module_(model), data_(data) {}
  nn::Module& model() override { return module_; }
  MicroBatch next() override;  // units: examples
  const char* unit_name() const override { return "seq"; }
  int64_t epoch() const override { return data_.epoch(); }
  std::map<std::string, int64_t> position() const override { return data_.position(); }
  void restore(const std::map<std::string, int64_t>& position) override { data_.restore(position); }

  // B * (the loss above) for one batch: recorded scalar.
  virtual Tensor batch_loss(const ClsBatch& b, double label_smoothing) const = 0;
  // Rows [begin, end)'s share of batch_loss(b) (data-parallel shards).
  virtual Tensor rows_loss(const ClsBatch& b, double label_smoothing, int64_t begin, int64_t end) const;

 private:
  nn::Module& module_;
  ClsBatchStream& data_;
};

class GptClassificationTask : public ClassificationTask {
 public:
  GptClassificationTask(models::GptClassifier& model, ClsBatchStream& data, double lm_weight)
      : ClassificationTask(model, data), model_(model), lm_weight_(lm_weight) {}
  Tensor batch_loss(const ClsBatch& b, double ls) const override { return summed_loss(model_, b, lm_weight_, ls); }
  Tensor rows_loss(const ClsBatch& b, double ls, int64_t begin, int64_t end) const override;
  static Tensor summed_loss(const models::GptClassifier& model, const ClsBatch& b, double lm_weight, double ls = 0.0);

 private:
  models::GptClassifier& model_;
  double lm_weight_;
};

class BertClassificationTask : public ClassificationTask {
 public:
  BertClassificationTask(models::BertForSequenceClassification& model, ClsBatchStream& data)
      : ClassificationTask(model, data), model_(model) {}
  Tensor batch_loss(const ClsBatch& b, double ls) const override { return summed_loss(model_, b, ls); }
  static Tensor summed_loss(const models::BertForSequenceClassification& model, const ClsBatch& b, double ls = 0.0);

 private:
  models::BertForSequenceClassification& model_;
};

}  // namespace qkv::train
