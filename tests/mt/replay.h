// The reference trajectories' batches (tools/refs/mt_*trajectory.py), replayed to the trainer in
// the reference's order.
#pragma once
#include <string>
#include <vector>

#include "qkv/train/seq2seq_task.h"
#include "ref.h"

namespace qkv::testing {

class ReplayStream : public train::BatchStream {
 public:
  explicit ReplayStream(std::vector<train::Seq2SeqBatch> b) : batches_(std::move(b)) {}
  train::Seq2SeqBatch next() override { return batches_[size_t(i_++ % int64_t(batches_.size()))]; }
  int64_t epoch() const override { return i_ / int64_t(batches_.size()); }
  std::map<std::string, int64_t> position() const override { return {{"i", i_}}; }
  void restore(const std::map<std::string, int64_t>& p) override { i_ = p.at("i"); }

 private:
  std::vector<train::Seq2SeqBatch> batches_;
  int64_t i_ = 0;
};

// Batches "src<i>", "pad<i>", "tin<i>", "tout<i>" of case c, i < n; target tokens are the
// non-pad (id 0) entries of tout.
inline std::vector<train::Seq2SeqBatch> reference_batches(const RefFile& ref, const std::string& c, int n) {
  std::vector<train::Seq2SeqBatch> batches;
  for (int i = 0; i < n; ++i) {
    train::Seq2SeqBatch b;
    std::string k = std::to_string(i);
    b.src = ref.get(c, "src" + k);
    b.src_pad = ref.get(c, "pad" + k);
    b.tgt_in = ref.get(c, "tin" + k);
    b.tgt_out = ref.get(c, "tout" + k);
    for (int64_t v : b.tgt_out.to_vector<int64_t>()) b.tgt_tokens += v != 0;
    batches.push_back(b);
  }
  return batches;
}

}  // namespace qkv::testing
