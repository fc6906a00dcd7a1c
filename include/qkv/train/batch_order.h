// qkv/train/batch_order.h - the order in which a training stream visits a fixed list of batches:
// epoch e visits them in text::epoch_batch_order(seed, e), so the order is a pure function of
// (seed, epoch, index) and a resume needs only those. The saved position also carries the seed,
// the batch count and the caller's fingerprint of the batch plan (the batches' members and
// tokens); restore() refuses any mismatch, because a different corpus, tokenizer or batcher with
// the same seed and count would silently change the order.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace qkv::train {

class BatchOrder {
 public:
  // who: the stream's name, for errors.
  BatchOrder(size_t batches, uint64_t seed, int64_t plan_fingerprint, std::string who);

  size_t next();  // the next batch id; moves to the next epoch after the last batch
  int64_t epoch() const { return epoch_; }
  std::map<std::string, int64_t> position() const;  // {"epoch", "index", "seed", "batches", "plan"}
  void restore(const std::map<std::string, int64_t>& pos);

 private:
  void shuffle();
  size_t batches_;
  uint64_t seed_;
  int64_t plan_;
  std::string who_;
  std::vector<uint32_t> order_;  // batch visit order this epoch
  int64_t epoch_ = 0, index_ = 0;
};

// Example indices sorted by length and cut into consecutive batches of batch_size: the plan of the
// classification, tagging and QA streams (batches of similar length pad little). Equal lengths
// come in an order shuffled by `seed` (text::epoch_batch_order's permutation), not in file order:
// a file sorted by label (the sentiment corpus is) gave batches of one label each, and a
// fine-tune then sat at chance for its first few hundred steps. batch_size must be positive.
std::vector<std::vector<size_t>> length_sorted_batches(const std::vector<size_t>& lengths, int64_t batch_size,
                                                       uint64_t seed);

// FNV-1a, 63 bits (a non-negative i64), over the values fed to it: a batch plan's fingerprint.
class PlanHash {
 public:
  void mix(uint64_t v) {
    for (int i = 0; i < 8; ++i, v >>= 8) h_ = (h_ ^ (v & 0xFF)) * 1099511628211ull;
  }
  int64_t value() const { return int64_t(h_ >> 1); }

 private:
  uint64_t h_ = 1469598103934665603ull;
};

// The length-sorted batches of `examples` (each with a token vector `ids`; ties shuffled by seed)
// and their fingerprint:
// every batch's size and example indices, and for each example what mix_example(hash, example)
// feeds in (its targets, say). The plan and the fingerprint of the classification, tagging and
// QA streams.
struct LengthPlan {
  std::vector<std::vector<size_t>> batches;  // batch -> example indices
  int64_t fingerprint = 0;
};
template <class Example, class MixExample>
LengthPlan fingerprinted_length_plan(const std::vector<Example>& examples, int64_t batch_size, uint64_t seed,
                                     MixExample mix_example) {
  std::vector<size_t> lengths(examples.size());
  for (size_t i = 0; i < lengths.size(); ++i) lengths[i] = examples[i].ids.size();
  LengthPlan out{length_sorted_batches(lengths, batch_size, seed)};
  PlanHash h;
  for (const std::vector<size_t>& batch : out.batches) {
    h.mix(batch.size());
    for (size_t i : batch) {
      h.mix(i);
      mix_example(h, examples[i]);
    }
  }
  out.fingerprint = h.value();
  return out;
}

}  // namespace qkv::train
