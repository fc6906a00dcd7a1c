// qkv/train/seq2seq_stream.h - the BatchStream over a tokenized parallel corpus.
//
// Batches are text::token_budget_batches over the examples' lengths: padded size
// B * max(S, T) <= `max_tokens`, B <= `max_sentences`; a pair longer than max_tokens is left
// out (counted by skipped()). The batch list is fixed; epoch e visits it in
// text::epoch_batch_order(seed, e), so the stream is a pure function of (seed, epoch, index)
// and resuming needs only those two counters. The saved position also carries the seed, the
// batch count and a fingerprint of the batch plan (members and their tokens), and restore()
// refuses any mismatch: a different corpus, tokenizer or batcher would silently change the order.
#pragma once
#include <cstdint>
#include <vector>

#include "qkv/train/seq2seq_data.h"

namespace qkv::train {

class Seq2SeqStream : public BatchStream {
 public:
  Seq2SeqStream(std::vector<Example> examples, SeqIds ids, int64_t max_tokens, int64_t max_sentences, uint64_t seed);

  Seq2SeqBatch next() override;
  int64_t epoch() const override { return epoch_; }
  std::map<std::string, int64_t> position() const override;
  void restore(const std::map<std::string, int64_t>& pos) override;

  int64_t batches_per_epoch() const { return int64_t(batches_.size()); }
  size_t skipped() const { return skipped_; }  // pairs longer than max_tokens, never batched
  const std::vector<Example>& examples() const { return examples_; }
  // Every batch once, in corpus order (for validation).
  std::vector<Seq2SeqBatch> all_batches() const;

 private:
  void shuffle_for_epoch();
  int64_t plan_fingerprint() const;
  std::vector<Example> examples_;
  SeqIds ids_;
  uint64_t seed_;
  std::vector<std::vector<int64_t>> batches_;  // example indices per batch
  size_t skipped_ = 0;
  int64_t plan_ = 0;                           // plan_fingerprint(), computed once
  std::vector<uint32_t> order_;                // batch visit order this epoch
  int64_t epoch_ = 0, index_ = 0;
};

}  // namespace qkv::train
