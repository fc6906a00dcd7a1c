// qkv/models/seq2seq.h - the contract every encoder-decoder model meets (Transformer, RNN with
// or without attention), so training, greedy/beam/sampling decoding, checkpoints and heatmaps
// work for all of them with no special cases.
//
// Token ids are i64. Source padding is given as src_pad (B, S) u8, 1 = padding.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "qkv/nn/module.h"
#include "qkv/ops/loss.h"

namespace qkv::models {

// Per-sentence decoding state: encoder output and the decoder's caches (self-attention K/V,
// projected cross-attention K/V, RNN hidden states ...). Rows are hypotheses.
class DecoderState {
 public:
  virtual ~DecoderState() = default;
  // Keeps rows `rows` (i64 indices into the current rows, repeats allowed) in that order:
  // beam search expands each sentence to k rows, then reorders after every step.
  virtual void select_rows(const std::vector<int64_t>& rows) = 0;
  virtual int64_t rows() const = 0;
  virtual int64_t steps() const = 0;  // target positions consumed so far
};

struct AttentionMaps {
  // Cross-attention weights per layer: (rows, heads, T, S); an RNN has one "layer" of one head.
  std::vector<Tensor> layers;
};

class Seq2Seq : public nn::Module {
 public:
  // Teacher forcing: logits (B, T, V) for decoder inputs tgt_in (B, T) (target shifted right).
  virtual Tensor forward(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in) = 0;
  // Teacher forcing's token loss against tgt_out (B, T), pad_id ignored, summed or averaged:
  // cross_entropy(forward(src, src_pad, tgt_in), tgt_out, ...). A model whose output layer is a
  // Linear overrides it with linear_cross_entropy, which keeps no (B, T, V) logits (ops/loss.h).
  virtual Tensor loss(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in, const Tensor& tgt_out,
                      int64_t pad_id, double label_smoothing, Reduction reduction);
  // Encodes once; the state holds everything step() needs.
  virtual std::unique_ptr<DecoderState> start(const Tensor& src, const Tensor& src_pad) = 0;
  // Feeds the last tokens (rows) and returns next-token logits (rows, V); advances the state.
  virtual Tensor step(DecoderState& state, const Tensor& last_tokens) = 0;
  // Exact cross-attention weights for a full (src, tgt_in) pair (replayed, for heatmaps).
  virtual AttentionMaps cross_attention(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in) = 0;

  virtual int64_t src_vocab() const = 0;
  virtual int64_t tgt_vocab() const = 0;
  virtual int64_t max_len() const = 0;  // longest source/target the model accepts
};

}  // namespace qkv::models
