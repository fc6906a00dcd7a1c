#include "qkv/train/seq2seq_stream.h"

#include "qkv/text/batching.h"

namespace qkv::train {

Seq2SeqStream::Seq2SeqStream(std::vector<Example> examples, SeqIds ids, int64_t max_tokens, int64_t max_sentences,
                             uint64_t seed)
    : examples_(std::move(examples)), ids_(ids) {
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
  order_.emplace(batches_.size(), seed, plan_fingerprint(), "Seq2SeqStream");
}

// FNV-1a over every batch's size, member indices and their source and target tokens (each
// sequence preceded by its length, so that boundaries count): identifies the batch plan.
int64_t Seq2SeqStream::plan_fingerprint() const {
  PlanHash h;
  for (const auto& members : batches_) {
    h.mix(members.size());
    for (int64_t i : members) {
      h.mix(uint64_t(i));
      for (const auto* seq : {&examples_[size_t(i)].src, &examples_[size_t(i)].tgt}) {
        h.mix(seq->size());
        for (int64_t t : *seq) h.mix(uint64_t(t));
      }
    }
  }
  return h.value();
}

Seq2SeqBatch Seq2SeqStream::next() {
  const auto& members = batches_[order_->next()];
  std::vector<const Example*> rows;
  for (int64_t i : members) rows.push_back(&examples_[size_t(i)]);
  return make_batch(rows, ids_);
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
