#include "qkv/train/batch_order.h"

#include <algorithm>

#include "qkv/text/batching.h"
#include "qkv/util/error.h"

namespace qkv::train {

BatchOrder::BatchOrder(size_t batches, uint64_t seed, int64_t plan_fingerprint, std::string who)
    : batches_(batches), seed_(seed), plan_(plan_fingerprint), who_(std::move(who)) {
  shuffle();
}

void BatchOrder::shuffle() { order_ = text::epoch_batch_order(batches_, seed_, uint64_t(epoch_)); }

size_t BatchOrder::next() {
  if (index_ >= int64_t(order_.size())) {
    ++epoch_;
    index_ = 0;
    shuffle();
  }
  return order_[size_t(index_++)];
}

std::map<std::string, int64_t> BatchOrder::position() const {
  return {{"epoch", epoch_}, {"index", index_}, {"seed", int64_t(seed_)}, {"batches", int64_t(batches_)},
          {"plan", plan_}};
}

void BatchOrder::restore(const std::map<std::string, int64_t>& pos) {
  const std::string w = who_ + "::restore";
  auto get = [&](const char* k) {
    auto it = pos.find(k);
    QKV_CHECK(it != pos.end(), w, "data position lacks '", k, "'");
    return it->second;
  };
  QKV_CHECK(uint64_t(get("seed")) == seed_ && get("batches") == int64_t(batches_), w, "the saved data position (seed ",
            get("seed"), ", ", get("batches"), " batches) does not match this corpus and config (seed ", seed_, ", ",
            batches_, " batches): resume with the same data and batch settings");
  QKV_CHECK(pos.count("plan"), w,
            "the saved data position has no batch-plan fingerprint ('plan'; checkpoints written before it was "
            "added): the batch order cannot be verified, so an exact resume is impossible; start a new run");
  QKV_CHECK(get("plan") == plan_, w, "the saved batch plan (fingerprint ", get("plan"),
            ") differs from this corpus, tokenizer and batching (", plan_,
            "), with the same seed and batch count: resume with the same data, tokenizer and qkv version");
  const int64_t epoch = get("epoch"), index = get("index");
  QKV_CHECK(epoch >= 0 && index >= 0 && index <= int64_t(batches_), w, "data position epoch ", epoch, ", index ", index,
            " is out of range for ", batches_, " batches");
  epoch_ = epoch;
  index_ = index;
  shuffle();
}

std::vector<std::vector<size_t>> length_sorted_batches(const std::vector<size_t>& lengths, int64_t batch_size,
                                                       uint64_t seed) {
  QKV_CHECK(batch_size > 0, "length_sorted_batches", "batch_size must be positive, got ", batch_size);
  // A seeded permutation first (the batch orders' own, at an epoch no stream reaches), then a
  // stable sort by length: equal lengths keep the permutation's order.
  const std::vector<uint32_t> perm = text::epoch_batch_order(lengths.size(), seed, ~uint64_t(0));
  std::vector<size_t> idx(perm.begin(), perm.end());
  std::stable_sort(idx.begin(), idx.end(), [&](size_t x, size_t y) { return lengths[x] < lengths[y]; });
  std::vector<std::vector<size_t>> plan;
  for (size_t s = 0; s < idx.size(); s += size_t(batch_size))
    plan.emplace_back(idx.begin() + std::ptrdiff_t(s), idx.begin() + std::ptrdiff_t(std::min(idx.size(), s + size_t(batch_size))));
  return plan;
}

}  // namespace qkv::train
