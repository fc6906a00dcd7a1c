// qkv/train/lm_task.h - causal language modelling (GPT): predict every next token.
//
//   inputs  w[0 .. T-1],  targets w[1 .. T]   of each window w of T + 1 tokens
//   loss    cross-entropy summed over the targets that count (not -100), averaged by the Trainer
//
// PackedLmStream packs documents as GPT-2 did: every document (its ids ending with a separator
// such as <|endoftext|>) is appended to one token stream, which is cut into windows of T + 1
// tokens that overlap by one (window k starts at k * T), the last partial window dropped.
// Consecutive windows form batches of `batch_size`, visited in a BatchOrder (seeded epoch
// shuffles, exact resume). No window holds padding.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "qkv/models/gpt.h"
#include "qkv/train/batch_order.h"
#include "qkv/train/trainer.h"

namespace qkv::train {

struct LmBatch {
  Tensor ids;      // (B, T) i64
  Tensor targets;  // (B, T) i64: the next token, or -100 where none counts
  Tensor key_pad;  // (B, T) u8, 1 = padding; undefined when nothing is padded
  int64_t tokens = 0;  // targets that count
};

class LmBatchStream {
 public:
  virtual ~LmBatchStream() = default;
  virtual LmBatch next() = 0;
  virtual int64_t epoch() const = 0;
  virtual std::map<std::string, int64_t> position() const = 0;
  virtual void restore(const std::map<std::string, int64_t>& position) = 0;
};

class PackedLmStream : public LmBatchStream {
 public:
  PackedLmStream(const std::vector<std::vector<int64_t>>& documents, int64_t context, int64_t batch_size,
                 uint64_t seed);
  LmBatch next() override;
  int64_t epoch() const override { return order_->epoch(); }
  std::map<std::string, int64_t> position() const override { return order_->position(); }
  void restore(const std::map<std::string, int64_t>& pos) override { order_->restore(pos); }

  int64_t windows() const { return windows_; }
  int64_t batches_per_epoch() const { return (windows_ + batch_ - 1) / batch_; }
  std::vector<LmBatch> all_batches() const;  // every batch once, in stream order (validation)

 private:
  LmBatch batch(size_t b) const;  // windows b * batch_size .. (the last batch may be smaller)
  std::vector<int64_t> stream_;   // all documents, concatenated
  int64_t context_, batch_, windows_ = 0;
  std::optional<BatchOrder> order_;
};

class LmTask : public TrainingTask {
 public:
  LmTask(models::Gpt& model, LmBatchStream& data) : model_(model), data_(data) {}
  nn::Module& model() override { return model_; }
  MicroBatch next() override;  // units: the targets that count
  int64_t epoch() const override { return data_.epoch(); }
  std::map<std::string, int64_t> position() const override { return data_.position(); }
  void restore(const std::map<std::string, int64_t>& position) override { data_.restore(position); }

  // Summed (label-smoothed if ls > 0) cross-entropy of one batch: recorded scalar.
  static Tensor summed_loss(const models::Gpt& model, const LmBatch& b, double ls = 0.0);
  // Mean per-token negative log-likelihood over batches, no grad, eval mode (exp() = perplexity).
  static double evaluate_nll(models::Gpt& model, const std::vector<LmBatch>& batches);

 private:
  models::Gpt& model_;
  LmBatchStream& data_;
};

// Summed negative log-likelihood of a text under a GPT, scored in windows of `context` tokens
// moved by `stride` (1 <= stride <= context): window k covers [k * stride, k * stride + context)
// and scores the tokens after the previous window's end, so every token from the second on is
// scored exactly once, with at least context - stride tokens of context once the first window is
// past. perplexity = exp(total / tokens). Eval mode, no grad.
struct NllSum {
  double total = 0;    // sum of -log p(token | context)
  int64_t tokens = 0;  // tokens scored: ids.size() - 1
};
NllSum strided_nll(models::Gpt& model, const std::vector<int64_t>& ids, int64_t context, int64_t stride);

}  // namespace qkv::train
