// qkv/train/tag_task.h - fine-tuning BERT for token classification (models/bert_tagger.h):
//
//   input   [CLS] pieces of a window of words [SEP] (pad)           text/word_alignment.h
//   labels  -100  label on each word's first piece, -100 elsewhere  -100 (pad)
//   loss    sum over labelled positions of CE(logits, label)  (units = labelled positions, so the
//           Trainer's sum / units is Hugging Face's mean over the non-ignored positions)
//
// Training examples are the windows of each sentence with stride = the window (every word
// labelled once); batches are sorted by length, right-padded, visited in a seeded BatchOrder
// (epoch shuffles, exact resume), as the classification stream.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "qkv/models/bert_tagger.h"
#include "qkv/text/word_alignment.h"
#include "qkv/train/batch_order.h"
#include "qkv/train/trainer.h"

namespace qkv::train {

struct TagSpecials {
  int64_t cls = 0, sep = 0, pad = 0;
  int32_t unk = -1;  // the piece of a word that encodes to nothing (-1: none)
  static TagSpecials of(const text::Tokenizer& tok);  // throws naming a missing [CLS] / [SEP] / [PAD]
};

struct TagExample {
  std::vector<int64_t> ids;     // [CLS] pieces [SEP]
  std::vector<int64_t> labels;  // same length: label id at first pieces, -100 elsewhere
};

struct TagBatch {
  Tensor ids;      // (B, T) i64
  Tensor key_pad;  // (B, T) u8, 1 = padding (undefined when no row is padded)
  Tensor labels;   // (B, T) i64, -100 at ignored positions and padding
  int64_t labelled = 0;  // positions with a label
};

// One window of a sentence: words [w.begin, w.end) of wp, with label ids per word (labels may
// be empty: all -100, for inference).
TagExample make_tag_example(const text::WordPieces& wp, const text::WordWindow& w, const std::vector<int64_t>& labels,
                            const TagSpecials& sp);
// The training examples of one sentence: its words split into windows of at most max_len
// pieces with [CLS] and [SEP], without overlap. *words_cut counts words that lost pieces.
std::vector<TagExample> sentence_tag_examples(const text::Tokenizer& tok, const TagSpecials& sp,
                                              const std::vector<std::string>& words,
                                              const std::vector<int64_t>& labels, int64_t max_len,
                                              int64_t* words_cut = nullptr);

TagBatch make_tag_batch(const std::vector<const TagExample*>& rows, int64_t pad_id);

class TagExampleStream {
 public:
  TagExampleStream(std::vector<TagExample> examples, int64_t batch_size, int64_t pad_id, uint64_t seed);
  TagBatch next() { return batch(order_->next()); }
  int64_t epoch() const { return order_->epoch(); }
  std::map<std::string, int64_t> position() const { return order_->position(); }
  void restore(const std::map<std::string, int64_t>& pos) { order_->restore(pos); }
  size_t batches() const { return plan_.size(); }
  TagBatch batch(size_t i) const;

 private:
  std::vector<TagExample> examples_;
  int64_t pad_;
  std::vector<std::vector<size_t>> plan_;  // batch -> example indices
  std::optional<BatchOrder> order_;
};

class TaggingTask : public TrainingTask {
 public:
  TaggingTask(models::BertForTokenClassification& model, TagExampleStream& data) : model_(model), data_(data) {}
  nn::Module& model() override { return model_; }
  MicroBatch next() override;  // units: labelled positions (words)
  const char* unit_name() const override { return "word"; }
  int64_t epoch() const override { return data_.epoch(); }
  std::map<std::string, int64_t> position() const override { return data_.position(); }
  void restore(const std::map<std::string, int64_t>& position) override { data_.restore(position); }

 private:
  models::BertForTokenClassification& model_;
  TagExampleStream& data_;
};

}  // namespace qkv::train
