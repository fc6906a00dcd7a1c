// qkv/attention/sdpa.h - differentiable scaled dot-product attention:
//
//   out = dropout(softmax(scale * Q K^T + mask)) V,  scale = 1/sqrt(Dh) by default
//   q (B, H, Tq, Dh), k (B, H, Tk, Dh), v (B, H, Tk, Dv)  ->  out (B, H, Tq, Dv)
//
// Without need_weights the fused kernel runs (kernels/attention.h: blocked online softmax,
// O(T) memory, backward recomputes P). With need_weights the naive path materialises the
// weights (B, H, Tq, Tk); they are differentiable too. To *show* attention without slowing the
// model down, keep need_weights off and call attention_weights() on the saved q, k of the
// layers/heads you want: it replays the exact softmax weights.
//
// Layout: inputs may be any 4-D views whose last axis is unit-stride (e.g. a (B, T, H, Dh)
// projection permuted to (B, H, T, Dh)): no copy is made. `out` is returned as a (B, H, Tq, Dv)
// view of a (B, Tq, H, Dv) buffer, so out.permute(0, 2, 1, 3) is contiguous and reshapes to
// (B, Tq, H * Dv) for free. Gradients of inputs laid out as (B, T, H, D) come back in that layout.
// A fully masked query row gives zeros (not NaN) and zero gradients.
#pragma once
#include <optional>
#include <vector>

#include "qkv/tensor/rng.h"
#include "qkv/tensor/tensor.h"

namespace qkv {

// All optional and combinable: a position is masked if any field masks it.
struct AttentionMask {
  bool causal = false;  // query i sees keys j <= i + (Tk - Tq) (aligned at the end: incremental decoding)
  Tensor key_padding;   // (B, Tk) bool/u8, true = padding (masked out)
  Tensor key_lengths;   // (B) i32/i64: keys j >= key_lengths[b] are padding (alternative to key_padding)
  Tensor mask;          // broadcastable to (B, H, Tq, Tk): bool/u8 (true = masked out) or floating
                        // (added to the scaled scores; -inf masks). Treated as a constant (no grad).
  // Packed sequences, a padding-free batch: with B = 1 and Tq = Tk = T, the T positions are
  // sequences of these lengths end to end (summing to T), and a query sees only the keys of its
  // own sequence (block-diagonal attention, FlashAttention's "varlen"). Combines with causal,
  // which then holds within each sequence. Without weights, dropout or gradients, the fused kernel
  // runs once per sequence; otherwise the block diagonal becomes an explicit (T, T) mask.
  std::vector<int64_t> packed_lengths;
};

struct SdpaResult {
  Tensor out;      // (B, H, Tq, Dv)
  Tensor weights;  // (B, H, Tq, Tk) softmax weights *before* dropout, if need_weights; else undefined
};

// Dropout applies when training && dropout_p > 0; its mask comes from `gen` (default_generator()
// if null): the call reserves B*H*Tq*Tk Philox draws, so a seeded generator gives the same output.
SdpaResult scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                        const AttentionMask& mask = {}, double dropout_p = 0.0,
                                        bool training = false, bool need_weights = false,
                                        std::optional<double> scale = {}, Generator* gen = nullptr);

// Replays softmax(scale * Q K^T + mask) for the heads `heads` (all if empty), not recorded:
// (B, heads.size() or H, Tq, Tk). Bit-identical to the weights the naive path returns.
Tensor attention_weights(const Tensor& q, const Tensor& k, const AttentionMask& mask = {},
                         std::optional<double> scale = {}, const std::vector<int64_t>& heads = {});

}  // namespace qkv
