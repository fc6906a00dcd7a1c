// qkv/attention/positions.h - position information inside attention.
//
// Rotary embeddings (RoPE, Su et al. 2021): each pair of channels of q and k is rotated by an
// angle proportional to the position, so q_i . k_j depends on i - j only.
//   theta_c = base^(-2c / Dh),  angle(p, c) = p * theta_c,  c = 0 .. Dh/2 - 1
//   half:        pairs (c, c + Dh/2)   (GPT-NeoX, LLaMA in Hugging Face)
//   interleaved: pairs (2c, 2c + 1)    (RoFormer, GPT-J)
//   (x_a, x_b) -> (x_a cos - x_b sin, x_b cos + x_a sin)
//
// Relative positions (Shaw et al. 2018): learned key and value vectors for each clipped distance
// j - i in [-k, k], shared by all heads:
//   e_ij = q_i . (k_j + aK_{ij}) / sqrt(Dh),   z_i = sum_j a_ij (v_j + aV_{ij})
#pragma once
#include "qkv/attention/sdpa.h"
#include "qkv/nn/layers.h"

namespace qkv::attention {

enum class RopeStyle { half, interleaved };

// x (B, H, T, Dh) at positions offset .. offset + T - 1 -> rotated x (differentiable).
Tensor apply_rope(const Tensor& x, int64_t offset = 0, double base = 10000.0, RopeStyle style = RopeStyle::half);

// Clipped relative distance index (Tq, Tk) i64: clip(j - i, -k, k) + k, where query i sits at
// absolute position Tk - Tq + i (the last Tq of Tk positions: incremental decoding).
Tensor relative_distance_index(int64_t tq, int64_t tk, int64_t max_distance);

struct RelativeAttentionResult {
  Tensor out;      // (B, H, Tq, Dh)
  Tensor weights;  // (B, H, Tq, Tk) softmax weights before dropout
};
// Shaw et al.'s attention on split heads: q (B, H, Tq, Dh), k, v (B, H, Tk, Dh), rel_k, rel_v
// (2 max_distance + 1, Dh); query i at absolute position Tk - Tq + i. mask as sdpa's (causal
// aligned at the end, key padding, key lengths, extra bool or additive mask). Differentiable.
// Dropout p on the weights when training.
RelativeAttentionResult relative_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& rel_k,
                                           const Tensor& rel_v, int64_t max_distance, const AttentionMask& mask = {},
                                           double dropout_p = 0.0, bool training = false);

class RelativeMultiHeadAttention : public nn::Module {
 public:
  RelativeMultiHeadAttention(int64_t d_model, int64_t heads, int64_t max_distance, double dropout = 0.0);
  struct Output {
    Tensor out;      // (B, Tq, D)
    Tensor weights;  // (B, H, Tq, Tk)
  };
  // Self-attention over x (B, T, D); with a cache of earlier keys the queries are the last Tq
  // positions (query i sits at absolute position Tk - Tq + i).
  Output forward(const Tensor& query, const Tensor& key, const Tensor& value, const AttentionMask& mask = {}) const;

  int64_t heads, head_dim, max_distance;
  std::shared_ptr<nn::Linear> q_proj, k_proj, v_proj, out_proj;
  std::shared_ptr<nn::Dropout> dropout;
  Tensor rel_k, rel_v;  // (2 * max_distance + 1, head_dim)

  // Clipped relative distance index (Tq, Tk) i64: clip(j - i, -k, k) + k.
  Tensor distance_index(int64_t tq, int64_t tk) const { return relative_distance_index(tq, tk, max_distance); }
};

}  // namespace qkv::attention
