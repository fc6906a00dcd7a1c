#include "qkv/train/tag_task.h"

#include <algorithm>

#include "qkv/ops/loss.h"
#include "qkv/ops/shape.h"

namespace qkv::train {

TagSpecials TagSpecials::of(const text::Tokenizer& tok) {
  auto need = [&](text::Role r, const char* name) {
    auto id = tok.special_id(r);
    QKV_CHECK(id.has_value(), "tokenizer", "has no ", name, " token: a BERT tagger needs [CLS], [SEP] and [PAD]");
    return int64_t(*id);
  };
  TagSpecials sp;
  sp.cls = need(text::Role::Cls, "[CLS]");
  sp.sep = need(text::Role::Sep, "[SEP]");
  sp.pad = need(text::Role::Pad, "[PAD]");
  auto unk = tok.special_id(text::Role::Unk);
  sp.unk = unk ? *unk : -1;
  return sp;
}

TagExample make_tag_example(const text::WordPieces& wp, const text::WordWindow& w, const std::vector<int64_t>& labels,
                            const TagSpecials& sp) {
  TagExample ex;
  const int64_t b = wp.word_start[size_t(w.begin)], e = wp.word_start[size_t(w.end)];
  ex.ids.reserve(size_t(e - b + 2));
  ex.ids.push_back(sp.cls);
  ex.labels.assign(size_t(e - b + 2), -100);
  for (int64_t i = b; i < e; ++i) ex.ids.push_back(wp.ids[size_t(i)]);
  ex.ids.push_back(sp.sep);
  if (!labels.empty())
    for (int64_t word = w.begin; word < w.end; ++word)
      ex.labels[size_t(1 + wp.word_start[size_t(word)] - b)] = labels[size_t(word)];  // the first piece
  return ex;
}

std::vector<TagExample> sentence_tag_examples(const text::Tokenizer& tok, const TagSpecials& sp,
                                              const std::vector<std::string>& words,
                                              const std::vector<int64_t>& labels, int64_t max_len,
                                              int64_t* words_cut) {
  QKV_CHECK(labels.size() == words.size(), "sentence_tag_examples", words.size(), " words but ", labels.size(),
            " labels");
  QKV_CHECK(max_len >= 3, "sentence_tag_examples", "max_len must be >= 3 ([CLS] word [SEP]), got ", max_len);
  const int64_t budget = max_len - 2;
  const text::WordPieces wp = text::split_words(tok, words, budget, sp.unk);
  if (words_cut) *words_cut += wp.words_cut;
  std::vector<TagExample> out;
  for (const auto& w : text::word_windows(wp, budget, budget)) out.push_back(make_tag_example(wp, w, labels, sp));
  return out;
}

TagBatch make_tag_batch(const std::vector<const TagExample*>& rows, int64_t pad_id) {
  QKV_CHECK(!rows.empty(), "make_tag_batch", "no examples");
  const int64_t B = int64_t(rows.size());
  int64_t T = 0;
  for (auto* r : rows) T = std::max<int64_t>(T, int64_t(r->ids.size()));
  std::vector<int64_t> ids(size_t(B * T), pad_id), labels(size_t(B * T), -100);  // (B, T)
  std::vector<uint8_t> pad(size_t(B * T), 1);                                    // (B, T)
  bool any_pad = false;
  TagBatch b;
  for (int64_t i = 0; i < B; ++i) {
    const TagExample& r = *rows[size_t(i)];
    const int64_t n = int64_t(r.ids.size());
    std::copy(r.ids.begin(), r.ids.end(), ids.begin() + i * T);
    std::copy(r.labels.begin(), r.labels.end(), labels.begin() + i * T);
    std::fill(pad.begin() + i * T, pad.begin() + i * T + n, uint8_t(0));
    any_pad |= n < T;
    for (int64_t y : r.labels) b.labelled += y != -100;
  }
  b.ids = Tensor::from_vector(ids, {B, T});
  if (any_pad) b.key_pad = Tensor::from_vector(pad, {B, T});
  b.labels = Tensor::from_vector(labels, {B, T});
  return b;
}

TagExampleStream::TagExampleStream(std::vector<TagExample> examples, int64_t batch_size, int64_t pad_id, uint64_t seed)
    : examples_(std::move(examples)), pad_(pad_id) {
  QKV_CHECK(!examples_.empty(), "tagging stream", "no training examples");
  QKV_CHECK(batch_size > 0, "tagging stream", "batch_size must be positive, got ", batch_size);
  LengthPlan p = fingerprinted_length_plan(examples_, batch_size, seed, [](PlanHash& h, const TagExample& e) {
    for (int64_t v : e.ids) h.mix(uint64_t(v));
    for (int64_t v : e.labels) h.mix(uint64_t(v));
  });
  plan_ = std::move(p.batches);
  order_.emplace(plan_.size(), seed, p.fingerprint, "tagging stream");
}

TagBatch TagExampleStream::batch(size_t i) const {
  std::vector<const TagExample*> rows;
  for (size_t e : plan_[i]) rows.push_back(&examples_[e]);
  return make_tag_batch(rows, pad_);
}

TrainingTask::MicroBatch TaggingTask::next() {
  TagBatch b = data_.next();
  MicroBatch m;
  m.units = b.labelled;
  m.summed_loss = [this, b](double ls) {
    Tensor logits = model_.forward(b.ids, b.key_pad);  // (B, T, C)
    return cross_entropy(logits, b.labels, -100, ls, Reduction::sum);  // train.label_smoothing (default 0)
  };
  const int64_t B = b.labels.size(0), T = b.labels.size(1);
  const int64_t* y = b.labels.data<int64_t>();
  m.row_units.assign(size_t(B), 0);  // labelled positions per row
  for (int64_t r = 0; r < B; ++r)
    for (int64_t t = 0; t < T; ++t) m.row_units[size_t(r)] += y[r * T + t] != -100;
  m.rows_loss = [this, b](double ls, int64_t begin, int64_t end) {
    auto rows = [&](const Tensor& x) { return x.defined() ? slice(x, 0, begin, end).contiguous() : x; };
    Tensor logits = model_.forward(rows(b.ids), rows(b.key_pad));  // (end - begin, T, C)
    return cross_entropy(logits, rows(b.labels), -100, ls, Reduction::sum);
  };
  return m;
}

}  // namespace qkv::train
