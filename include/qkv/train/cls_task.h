// qkv/train/cls_task.h - fine-tuning a GPT for classification (Radford et al. 2018, 3.3):
//
//   loss = mean over examples of CE(class | h at [EXTRACT])
//        + lm_weight * mean over counted tokens of CE(next token)     (the auxiliary LM loss)
//
// A micro-batch's summed loss is B times that (units = B examples), so the Trainer's
// sum / units gives exactly the per-batch loss above; with accumulation over micro-batches the
// LM term is averaged per micro-batch. GPT-1 used lm_weight 0.5; 0 turns the auxiliary loss off.
#pragma once
#include <map>
#include <string>

#include "qkv/models/gpt.h"
#include "qkv/train/trainer.h"

namespace qkv::train {

struct ClsBatch {
  Tensor ids;          // (B, T) i64: [START] text [EXTRACT] (pad)
  Tensor key_pad;      // (B, T) u8, 1 = padding (or undefined)
  Tensor extract_pos;  // (B) i64
  Tensor labels;       // (B) i64
  Tensor lm_targets;   // (B, T - 1) i64: ids[:, 1:], -100 where the token or its input is padding
};

class ClsBatchStream {
 public:
  virtual ~ClsBatchStream() = default;
  virtual ClsBatch next() = 0;
  virtual int64_t epoch() const = 0;
  virtual std::map<std::string, int64_t> position() const = 0;
  virtual void restore(const std::map<std::string, int64_t>& position) = 0;
};

class GptClassificationTask : public TrainingTask {
 public:
  GptClassificationTask(models::GptClassifier& model, ClsBatchStream& data, double lm_weight)
      : model_(model), data_(data), lm_weight_(lm_weight) {}
  nn::Module& model() override { return model_; }
  MicroBatch next() override;  // units: examples
  const char* unit_name() const override { return "seq"; }
  int64_t epoch() const override { return data_.epoch(); }
  std::map<std::string, int64_t> position() const override { return data_.position(); }
  void restore(const std::map<std::string, int64_t>& position) override { data_.restore(position); }

  // B * (the loss above) for one batch: recorded scalar.
  static Tensor summed_loss(const models::GptClassifier& model, const ClsBatch& b, double lm_weight, double ls = 0.0);

 private:
  models::GptClassifier& model_;
  ClsBatchStream& data_;
  double lm_weight_;
};

}  // namespace qkv::train
