// qkv/train/seq2seq_data.h - how sentences become model inputs, in one place for training,
// validation and translation:
//   source   x1 .. xn </s>                 (ids from the source tokenizer, </s> appended)
//   decoder  <s> y1 .. ym                  (teacher forcing input: the target shifted right)
//   target   y1 .. ym </s>                 (what the decoder must predict)
// Sequences longer than the model allows are truncated (keeping </s>) and reported.
#pragma once
#include <string_view>
#include <vector>

#include "qkv/text/tokenizer.h"
#include "qkv/train/seq2seq_task.h"

namespace qkv::train {

struct SeqIds {
  int64_t pad, bos, eos;
};

// Tokenizes `line` and appends </s>; if that exceeds max_len, keeps the first max_len - 1 ids
// plus </s> and sets *truncated.
std::vector<int64_t> encode_sentence(const text::Tokenizer& tok, std::string_view line, int64_t eos, int64_t max_len,
                                     bool* truncated = nullptr);

struct Example {
  std::vector<int64_t> src, tgt;  // both end with </s>
};

// Pads a group of examples into one batch (rows in the given order).
Seq2SeqBatch make_batch(const std::vector<const Example*>& rows, const SeqIds& ids);
// Source-only batch for decoding: src (B, S) i64 and src_pad (B, S) u8.
void make_source_batch(const std::vector<const std::vector<int64_t>*>& rows, int64_t pad, Tensor& src, Tensor& src_pad);

}  // namespace qkv::train
