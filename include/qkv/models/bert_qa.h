// qkv/models/bert_qa.h - BERT for extractive question answering (Hugging Face's
// BertForQuestionAnswering; Devlin et al. 2019, 4.2):
//
//   h              = Bert(ids, token_type_ids, key_pad).hidden     (B, T, D), no pooler
//   [start, end]   = qa_outputs(h)                                 (B, T, 2) -> two (B, T)
//   loss           = (CE(start, start_positions) + CE(end, end_positions)) / 2
//
// Parameter names: bert.embeddings.*, bert.encoder.* (models::Bert's, no bert.pooler.*) and
// qa_outputs.{weight, bias}; io/bert_qa.h maps bert.* to the published layout. The loss follows
// Hugging Face: positions are clamped to [0, T] and T is ignored (a position past the window
// counts for nothing), each cross-entropy a mean over its counted rows; the logits of padding
// positions take part as they do there (the features never label them).
#pragma once
#include <memory>

#include "qkv/models/bert.h"
#include "qkv/ops/loss.h"

namespace qkv::models {

class BertForQuestionAnswering : public nn::Module {
 public:
  // qa_outputs drawn from gen with Hugging Face's initialisation (N(0, 0.02), zero bias).
  explicit BertForQuestionAnswering(std::shared_ptr<Bert> bert, Generator& gen = default_generator());

  struct Logits {
    Tensor start, end;  // (B, T) each
  };
  // ids (B, T) i64, token_type_ids (B, T) i64, key_pad (B, T) u8 (1 = padding) or undefined.
  Logits forward(const Tensor& ids, const Tensor& token_type_ids, const Tensor& key_pad) const;
  // B rows packed end to end without padding (Bert::hidden_packed): ids, token_type_ids (1, N) -> (1, N) each.
  Logits forward_packed(const Tensor& ids, const Tensor& token_type_ids, const std::vector<int64_t>& lengths) const;

  // Hugging Face's loss above; start/end positions (B) i64. reduction sum returns the sum of
  // the two cross-entropies' sums halved (B times the mean loss when nothing is ignored).
  static Tensor loss(const Logits& logits, const Tensor& start_positions, const Tensor& end_positions,
                     Reduction reduction = Reduction::mean);

  std::shared_ptr<Bert> bert;            // the encoder (its pooler is not a parameter here)
  std::shared_ptr<nn::Linear> qa_outputs;  // (D -> 2)
};

}  // namespace qkv::models
