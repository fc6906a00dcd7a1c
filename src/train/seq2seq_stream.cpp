#include "qkv/train/seq2seq_stream.h"

#include <algorithm>
#include <numeric>

#include "qkv/text/corpus.h"

namespace qkv::train {

Seq2SeqStream::Seq2SeqStream(std::vector<Example> examples, SeqIds ids, int64_t max_tokens, int64_t max_sentences,
                             uint64_t seed)
    : examples_(std::move(examples)), ids_(ids), seed_(seed) {
  QKV_CHECK(!examples_.empty(), "Seq2SeqStream", "the training corpus is empty");
  QKV_CHECK(max_tokens > 0 && max_sentences > 0, "Seq2SeqStream", "max_tokens and max_sentences must be positive");
  std::vector<int64_t> idx(examples_.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
    const Example &x = examples_[size_t(a)], &y = examples_[size_t(b)];
    if (x.tgt.size() != y.tgt.size()) return x.tgt.size() < y.tgt.size();
    return x.src.size() < y.src.size();
  });
  std::vector<int64_t> cur;
  int64_t width = 0;
  for (int64_t i : idx) {
    const Example& e = examples_[size_t(i)];
    int64_t w = std::max<int64_t>(std::max(width, int64_t(e.src.size())), int64_t(e.tgt.size()));
    if (!cur.empty() && (w * int64_t(cur.size() + 1) > max_tokens || int64_t(cur.size()) >= max_sentences)) {
      batches_.push_back(std::move(cur));
      cur.clear();
      w = std::max<int64_t>(int64_t(e.src.size()), int64_t(e.tgt.size()));
    }
    cur.push_back(i);
    width = w;
  }
  if (!cur.empty()) batches_.push_back(std::move(cur));
  shuffle_for_epoch();
}

void Seq2SeqStream::shuffle_for_epoch() {
  order_.resize(batches_.size());
  std::iota(order_.begin(), order_.end(), 0);
  uint64_t state = seed_ * 0x9E3779B97F4A7C15ull + uint64_t(epoch_) + 1;
  for (size_t i = order_.size(); i > 1; --i) {  // Fisher-Yates
    size_t j = size_t(text::splitmix64(state) % i);
    std::swap(order_[i - 1], order_[j]);
  }
}

Seq2SeqBatch Seq2SeqStream::next() {
  if (index_ >= int64_t(order_.size())) {
    ++epoch_;
    index_ = 0;
    shuffle_for_epoch();
  }
  const auto& members = batches_[size_t(order_[size_t(index_++)])];
  std::vector<const Example*> rows;
  for (int64_t i : members) rows.push_back(&examples_[size_t(i)]);
  return make_batch(rows, ids_);
}

std::map<std::string, int64_t> Seq2SeqStream::position() const {
  return {{"epoch", epoch_}, {"index", index_}, {"seed", int64_t(seed_)}, {"batches", int64_t(batches_.size())}};
}

void Seq2SeqStream::restore(const std::map<std::string, int64_t>& pos) {
  auto get = [&](const char* k) {
    auto it = pos.find(k);
    QKV_CHECK(it != pos.end(), "Seq2SeqStream::restore", "data position lacks '", k, "'");
    return it->second;
  };
  QKV_CHECK(uint64_t(get("seed")) == seed_ && get("batches") == int64_t(batches_.size()), "Seq2SeqStream::restore",
            "the saved data position (seed ", get("seed"), ", ", get("batches"),
            " batches) does not match this corpus and config (seed ", seed_, ", ", batches_.size(),
            " batches): resume with the same data and batch settings");
  epoch_ = get("epoch");
  index_ = get("index");
  shuffle_for_epoch();
}

std::vector<Seq2SeqBatch> Seq2SeqStream::all_batches() const {
  std::vector<Seq2SeqBatch> out;
  for (const auto& members : batches_) {
    std::vector<const Example*> rows;
    for (int64_t i : members) rows.push_back(&examples_[size_t(i)]);
    out.push_back(make_batch(rows, ids_));
  }
  return out;
}

}  // namespace qkv::train
