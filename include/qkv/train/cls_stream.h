// qkv/train/cls_stream.h - classification examples and batches of them, for a fine-tuned GPT
// (the input transformation of Radford et al. 2018, 3.3) or BERT (Devlin et al. 2019, 3):
//
//   GPT   single:  [START] a [EXTRACT]        pair:  [START] a [DELIM] b [EXTRACT]
//   BERT  single:  [CLS] a [SEP]              pair:  [CLS] a [SEP] b [SEP]   (segment 1 from b on)
//
// Inputs longer than max_len are truncated in their text (longest first for pairs, as Hugging
// Face's "longest_first": a token comes off the end of the longer part, of b on a tie, until the
// whole fits), so the special tokens always stay. Batches are right-padded: causal attention never lets a real
// position see a later (padded) one, and key_pad hides the padding from everything else, so the
// state at [EXTRACT] does not depend on the batch it is in.
#pragma once
#include <optional>
#include <string_view>
#include <vector>

#include "qkv/text/tokenizer.h"
#include "qkv/train/batch_order.h"
#include "qkv/train/cls_task.h"

namespace qkv::train {

// The tokenizer's [START] [DELIM] [EXTRACT] (roles start / delim / extract; text/finetune_tokens.h).
struct ClsTokens {
  int64_t start = 0, delim = -1, extract = 0;  // delim -1: none (single texts only)
  static ClsTokens of(const text::Tokenizer& tok);  // throws naming a missing start / extract
};

// The model input of one example (b == nullptr: a single text); *truncated tells if text was cut.
std::vector<int64_t> encode_cls_input(const text::Tokenizer& tok, const ClsTokens& t, std::string_view a,
                                      const std::string_view* b, int64_t max_len, bool* truncated = nullptr);

struct ClsExample {
  std::vector<int64_t> ids;  // encode_cls_input's output (ends with [EXTRACT]) or encode_bert_cls_input's
  int64_t label = 0;
  std::vector<int64_t> types;  // BERT's token type (segment) per id; empty for GPT
};

// BERT's input of one example: [CLS] a [SEP] (b [SEP]), types 0 up to the first [SEP], 1 after
// it; cut to max_len tokens as above. The tokenizer needs roles cls and sep.
ClsExample encode_bert_cls_input(const text::Tokenizer& tok, std::string_view a, const std::string_view* b,
                                 int64_t max_len, bool* truncated = nullptr);

// Right-padded batch of rows (padding id 0, masked by key_pad); token_type_ids when the rows have types.
ClsBatch make_cls_batch(const std::vector<const ClsExample*>& rows);

// Examples sorted by length (stable) and cut into batches of batch_size, visited in a seeded
// BatchOrder (epoch shuffles, exact resume).
class ClsExampleStream : public ClsBatchStream {
 public:
  ClsExampleStream(std::vector<ClsExample> examples, int64_t batch_size, uint64_t seed);
  ClsBatch next() override { return batch(order_->next()); }
  int64_t epoch() const override { return order_->epoch(); }
  std::map<std::string, int64_t> position() const override { return order_->position(); }
  void restore(const std::map<std::string, int64_t>& pos) override { order_->restore(pos); }
  size_t batches() const { return plan_.size(); }
  std::vector<ClsBatch> all_batches() const;  // every batch once (validation loss)

 private:
  ClsBatch batch(size_t i) const;
  std::vector<ClsExample> examples_;
  std::vector<std::vector<size_t>> plan_;  // batch -> example indices
  std::optional<BatchOrder> order_;
};

}  // namespace qkv::train
