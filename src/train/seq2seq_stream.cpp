#include "qkv/train/seq2seq_stream.h"

#include "qkv/text/batching.h"

namespace qkv::train {

Seq2SeqStream::Seq2SeqStream(std::vector<Example> examples, SeqIds ids, int64_t max_tokens, int64_t max_sentences,
                             uint64_t seed)
    : examples_(std::move(examples)), ids_(ids), seed_(seed) {
  QKV_CHECK(!examples_.empty(), "Seq2SeqStream", "the training corpus is empty");
  QKV_CHECK(max_tokens > 0 && max_sentences > 0, "Seq2SeqStream", "max_tokens and max_sentences must be positive");
  text::BatcherOptions opt;
  opt.max_tokens = max_tokens;
  opt.max_batch = max_sentences;
  std::vector<int64_t> src_lengths, tgt_lengths;
  for (const Example& e : examples_) {
    src_lengths.push_back(int64_t(e.src.size()));
    tgt_lengths.push_back(int64_t(e.tgt.size()));
  }
  batches_ = text::token_budget_batches(src_lengths, tgt_lengths, opt, &skipped_);
  QKV_CHECK(!batches_.empty(), "Seq2SeqStream", "every one of the ", examples_.size(),
            " pairs is longer than max_tokens ", max_tokens);
  plan_ = plan_fingerprint();
  shuffle_for_epoch();
}

// FNV-1a over every batch's size, member indices and their source and target tokens (each
// sequence preceded by its length, so that boundaries count): identifies
// the batch plan, so that a resume refuses a corpus, tokenizer or batching algorithm that would
// give the same number of batches but different ones. 63 bits (stored as a non-negative i64).
int64_t Seq2SeqStream::plan_fingerprint() const {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i, v >>= 8) h = (h ^ (v & 0xFF)) * 1099511628211ull;
  };
  for (const auto& members : batches_) {
    mix(members.size());
    for (int64_t i : members) {
      mix(uint64_t(i));
      for (const auto* seq : {&examples_[size_t(i)].src, &examples_[size_t(i)].tgt}) {
        mix(seq->size());
        for (int64_t t : *seq) mix(uint64_t(t));
      }
    }
  }
  return int64_t(h >> 1);
}

void Seq2SeqStream::shuffle_for_epoch() { order_ = text::epoch_batch_order(batches_.size(), seed_, uint64_t(epoch_)); }

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
  return {{"epoch", epoch_},
          {"index", index_},
          {"seed", int64_t(seed_)},
          {"batches", int64_t(batches_.size())},
          {"plan", plan_}};
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
  QKV_CHECK(pos.count("plan"), "Seq2SeqStream::restore",
            "the saved data position has no batch-plan fingerprint ('plan'; checkpoints written before it was "
            "added): the batch order cannot be verified, so an exact resume is impossible; start a new run");
  QKV_CHECK(get("plan") == plan_, "Seq2SeqStream::restore",
            "the saved batch plan (fingerprint ", get("plan"), ") differs from this corpus, tokenizer and batching (",
            plan_, "), with the same seed and batch count: resume with the same data, tokenizer and "
            "qkv version");
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
