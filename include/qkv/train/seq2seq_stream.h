// qkv/train/seq2seq_stream.h - the BatchStream over a tokenized parallel corpus.
//
// Batches are text::token_budget_batches over the examples' lengths: padded size
// B * max(S, T) <= `max_tokens`, B <= `max_sentences`; a pair longer than max_tokens is left
// out (counted by skipped()). The batch list is fixed and visited in a BatchOrder
// (train/batch_order.h): a pure function of (seed, epoch, index), whose saved position carries a
// fingerprint of the batch plan (members and their tokens) that restore() checks.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "qkv/train/batch_order.h"
#include "qkv/train/seq2seq_data.h"

namespace qkv::train {

class Seq2SeqStream : public BatchStream {
 public:
  Seq2SeqStream(std::vector<Example> examples, SeqIds ids, int64_t max_tokens, int64_t max_sentences, uint64_t seed);

  Seq2SeqBatch next() override;
  int64_t epoch() const override { return order_->epoch(); }
  std::map<std::string, int64_t> position() const override { return order_->position(); }
  void restore(const std::map<std::string, int64_t>& pos) override { order_->restore(pos); }

  int64_t batches_per_epoch() const { return int64_t(batches_.size()); }
  size_t skipped() const { return skipped_; }  // pairs longer than max_tokens, never batched
  const std::vector<Example>& examples() const { return examples_; }
  // Every batch once, in corpus order (for validation).
  std::vector<Seq2SeqBatch> all_batches() const;

 private:
  int64_t plan_fingerprint() const;
  std::vector<Example> examples_;
  SeqIds ids_;
  std::vector<std::vector<int64_t>> batches_;  // example indices per batch
  size_t skipped_ = 0;
  std::optional<BatchOrder> order_;            // set once the batches are known
};

}  // namespace qkv::train
