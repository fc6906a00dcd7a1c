// qkv/text/batching.h - length-bucketed batches under a token budget, without tensors: batches
// are row-major int32 arrays plus shapes and lengths; the training code wraps them in Tensors.
//
//   ParallelDataset ds;  ds.add(src_ids, tgt_ids) ...
//   TokenBudgetBatcher b(ds, {.max_tokens = 4096, .pad_id = 0}, /*seed=*/1);
//   Batch x = b.next();   // x.src (B, S), x.tgt (B, T), x.src_lengths (B) ...
//   DataPosition p = b.position();   // save with the checkpoint
//   TokenBudgetBatcher b2(ds, same options, p.seed);  b2.restore(p);  // continues identically
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace qkv::text {

// Pairs of token id sequences, stored flat (two id arrays plus offsets).
class ParallelDataset {
 public:
  void add(const std::vector<int32_t>& src, const std::vector<int32_t>& tgt);
  size_t size() const { return src_off_.size() - 1; }
  int64_t src_len(size_t i) const { return int64_t(src_off_[i + 1] - src_off_[i]); }
  int64_t tgt_len(size_t i) const { return int64_t(tgt_off_[i + 1] - tgt_off_[i]); }
  const int32_t* src(size_t i) const { return src_.data() + src_off_[i]; }
  const int32_t* tgt(size_t i) const { return tgt_.data() + tgt_off_[i]; }

 private:
  std::vector<int32_t> src_, tgt_;
  std::vector<uint64_t> src_off_{0}, tgt_off_{0};
};

// Streams a two-column TSV ("src\ttgt" per line, as written by the corpus builders) through
// the encoders into a dataset, without holding the text. Stops after max_lines (0 = all).
// Throws qkv::Error naming the file and line for a row without exactly two fields.
using Encoder = std::function<std::vector<int32_t>(std::string_view)>;
ParallelDataset read_parallel_dataset(const std::string& tsv_path, const Encoder& encode_src,
                                      const Encoder& encode_tgt, size_t max_lines = 0);

struct Batch {
  int64_t batch = 0, src_len = 0, tgt_len = 0;  // B, S, T
  std::vector<int32_t> src;                     // (B, S), padded with pad_id
  std::vector<int32_t> tgt;                     // (B, T), padded with pad_id
  std::vector<int32_t> src_lengths;             // (B)
  std::vector<int32_t> tgt_lengths;             // (B)
  std::vector<int64_t> indices;                 // (B) example indices in the dataset
  int64_t padded_tokens() const { return batch * std::max(src_len, tgt_len); }
  int64_t real_tokens() const;                  // sum of max(src_length, tgt_length) per row
};

// (B, L) uint8 key-padding mask: 1 where position >= length (a pad key to ignore), else 0 -
// PyTorch's key_padding_mask convention (True = masked).
std::vector<uint8_t> key_padding_mask(const std::vector<int32_t>& lengths, int64_t max_len);

// Where training is in the data: the next batch is batch `batch_index` of epoch `epoch`.
struct DataPosition {
  uint64_t epoch = 0, batch_index = 0, seed = 0;
  bool operator==(const DataPosition&) const = default;
  std::array<int64_t, 3> to_array() const;  // for training_state.safetensors
  static DataPosition from_array(const std::array<int64_t, 3>& a);
  std::string to_json() const;              // {"epoch":..,"batch_index":..,"seed":..}
  static DataPosition from_json(const std::string& s);
};

struct BatcherOptions {
  int64_t max_tokens = 4096;  // budget: B * max(S, T) <= max_tokens
  int64_t max_batch = 0;      // cap on B (0 = none)
  int64_t max_len = 0;        // drop examples longer than this on either side (0 = no limit)
  int32_t pad_id = 0;
};

// The batching algorithm (used by TokenBudgetBatcher and train::Seq2SeqStream), on lengths only.
// Buckets by length: examples sorted by (max(src, tgt) length, src length, tgt length, index)
// and packed greedily into batches under the budget (pad_id unused). Examples that cannot fit
// (empty, longer than max_len, or than max_tokens) are left out and counted in *skipped.
// Returns the example indices of each batch.
std::vector<std::vector<int64_t>> token_budget_batches(const std::vector<int64_t>& src_lengths,
                                                       const std::vector<int64_t>& tgt_lengths,
                                                       const BatcherOptions& opt, size_t* skipped = nullptr);
// The order in which epoch `epoch` visits `n` batches: Fisher-Yates driven by splitmix64 seeded
// with (seed, epoch), so training data order is a pure function of (seed, epoch).
std::vector<uint32_t> epoch_batch_order(size_t n, uint64_t seed, uint64_t epoch);

// The batch set of token_budget_batches, fixed; each epoch visits it in epoch_batch_order.
class TokenBudgetBatcher {
 public:
  TokenBudgetBatcher(const ParallelDataset& data, const BatcherOptions& opt, uint64_t seed);
  size_t batches_per_epoch() const { return batches_.size(); }
  size_t skipped() const { return skipped_; }
  // The next batch; moves the position (to the next epoch after the last batch).
  Batch next();
  // Batch `i` of `epoch`'s order, without moving the position.
  Batch batch_at(uint64_t epoch, uint64_t i) const;
  // The permutation of batch ids used in `epoch`.
  std::vector<uint32_t> epoch_order(uint64_t epoch) const;
  DataPosition position() const { return pos_; }
  // Continues from a saved position; throws qkv::Error if its seed differs from this batcher's
  // or its batch_index is out of range.
  void restore(const DataPosition& p);

 private:
  Batch make_batch(const std::vector<int64_t>& members) const;
  const ParallelDataset& data_;
  BatcherOptions opt_;
  std::vector<std::vector<int64_t>> batches_;  // example indices per batch
  size_t skipped_ = 0;
  DataPosition pos_;
  std::vector<uint32_t> order_;  // cached order of pos_.epoch
  uint64_t order_epoch_ = ~0ull;
};

}  // namespace qkv::text
