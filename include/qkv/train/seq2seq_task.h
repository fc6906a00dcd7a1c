// qkv/train/seq2seq_task.h - training an encoder-decoder (any models::Seq2Seq) with teacher
// forcing: the decoder reads the target shifted right (starting with <s>) and each micro-batch's
// loss is the label-smoothed cross-entropy summed over its non-pad target tokens.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "qkv/models/seq2seq.h"
#include "qkv/train/trainer.h"

namespace qkv::train {

struct Seq2SeqBatch {
  Tensor src;      // (B, S) i64
  Tensor src_pad;  // (B, S) u8, 1 = pad
  Tensor tgt_in;   // (B, T) i64: <s> y1 .. y_{T-1}
  Tensor tgt_out;  // (B, T) i64: y1 .. y_T (</s> last), pad where absent
  int64_t src_tokens = 0, tgt_tokens = 0;  // real (non-pad) tokens
};

// An endless, resumable stream of training batches (epochs reshuffle deterministically).
class BatchStream {
 public:
  virtual ~BatchStream() = default;
  virtual Seq2SeqBatch next() = 0;
  virtual int64_t epoch() const = 0;  // epochs completed so far
  virtual std::map<std::string, int64_t> position() const = 0;
  virtual void restore(const std::map<std::string, int64_t>& position) = 0;
};

class Seq2SeqTask : public TrainingTask {
 public:
  Seq2SeqTask(models::Seq2Seq& model, BatchStream& data, int64_t pad_id) : model_(model), data_(data), pad_(pad_id) {}

  nn::Module& model() override { return model_; }
  MicroBatch next() override;  // units: the batch's target tokens
  int64_t epoch() const override { return data_.epoch(); }
  std::map<std::string, int64_t> position() const override { return data_.position(); }
  void restore(const std::map<std::string, int64_t>& position) override { data_.restore(position); }

  // Mean per-token label-smoothed (if ls > 0) cross-entropy of `model` on batches, no grad.
  static double evaluate_loss(models::Seq2Seq& model, const std::vector<Seq2SeqBatch>& batches, int64_t pad_id,
                              double label_smoothing = 0.0);

 private:
  models::Seq2Seq& model_;
  BatchStream& data_;
  int64_t pad_;
};

}  // namespace qkv::train
