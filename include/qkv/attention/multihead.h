// qkv/attention/multihead.h - multi-head attention (Vaswani et al. 2017, section 3.2.2):
//
//   MultiHead(Q, K, V) = Concat(head_1..head_h) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)
//
// with d_k = d_v = d_model / h. Parameters use the Hugging Face Marian/BART names:
// q_proj, k_proj, v_proj, out_proj (each a Linear). torch.nn.MultiheadAttention's packed
// in_proj_weight is [q_proj.weight; k_proj.weight; v_proj.weight] stacked on axis 0.
//
// Self-attention: forward(x, x, x). Cross-attention: forward(decoder_x, memory, memory).
// Incremental decoding (not recorded: call under NoGradGuard):
//   - self-attention: step(x_new, cache) projects the new positions, appends their K/V to the
//     cache and attends over everything cached so far (causal within the new positions);
//   - cross-attention: project_kv(memory) once, then attend(x_new, kv, mask) every step.
#pragma once
#include <memory>

#include "qkv/attention/sdpa.h"
#include "qkv/nn/layers.h"

namespace qkv::attention {

// Self-attention keys and values of the positions decoded so far. Stored (B, capacity, H, Dh),
// grown by doubling, so appending one position costs O(B H Dh) and k()/v() are free views.
class KVCache {
 public:
  Tensor k() const;  // (B, H, length, Dh) view
  Tensor v() const;  // (B, H, length, Dh) view
  int64_t length() const { return length_; }
  int64_t rows() const { return k_.defined() ? k_.size(0) : 0; }
  // k_new, v_new (B, t, H, Dh): appended at positions length .. length + t - 1.
  void append(const Tensor& k_new, const Tensor& v_new);
  // Keeps rows `index` (i64 (R), repeats allowed) in that order (beam search reordering).
  void select_rows(const Tensor& index);
  void clear() { k_ = v_ = Tensor(); length_ = 0; }

 private:
  Tensor k_, v_;  // (B, capacity, H, Dh)
  int64_t length_ = 0;
};

// Projected keys and values of a fixed memory (the encoder output), for cross-attention.
struct ProjectedKV {
  Tensor k, v;  // (B, H, S, Dh) each
  void select_rows(const Tensor& index);  // i64 (R)
};

struct MhaOutput {
  Tensor out;      // (B, Tq, d_model)
  Tensor weights;  // (B, H, Tq, Tk) softmax weights (before dropout) if requested, else undefined
};

class MultiHeadAttention : public nn::Module {
 public:
  // kdim / vdim: feature sizes of key / value inputs (-1 = d_model), as torch.nn.MultiheadAttention.
  // dropout: on the attention weights (training only).
  MultiHeadAttention(int64_t d_model, int64_t heads, double dropout = 0.0, bool bias = true, int64_t kdim = -1,
                     int64_t vdim = -1, nn::init::Scheme scheme = nn::init::Scheme::pytorch_default);

  // query (B, Tq, d_model), key (B, Tk, kdim), value (B, Tk, vdim) -> out (B, Tq, d_model).
  MhaOutput forward(const Tensor& query, const Tensor& key, const Tensor& value, const AttentionMask& mask = {},
                    bool need_weights = false) const;

  // ---- incremental decoding ----
  // Self-attention over x_new (B, t, d_model) and all cached positions; appends to `cache`.
  // The new positions are causal among themselves (AttentionMask::causal aligns at the end).
  MhaOutput step(const Tensor& x_new, KVCache& cache, bool need_weights = false) const;
  // The projected K/V of a memory (B, S, kdim/vdim), computed once per source sentence.
  ProjectedKV project_kv(const Tensor& key, const Tensor& value) const;
  // Attention of query (B, Tq, d_model) over precomputed K/V.
  MhaOutput attend(const Tensor& query, const ProjectedKV& kv, const AttentionMask& mask = {},
                   bool need_weights = false) const;

  int64_t d_model() const { return d_model_; }
  int64_t heads() const { return heads_; }
  int64_t head_dim() const { return head_dim_; }

  std::shared_ptr<nn::Linear> q_proj, k_proj, v_proj, out_proj;
  double dropout;

 private:
  Tensor split_heads(const Tensor& x) const;  // (B, T, d_model) -> (B, H, T, Dh) view
  MhaOutput attend_heads(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask,
                         bool need_weights) const;  // q/k/v (B, H, T, Dh) -> projected output
  int64_t d_model_, heads_, head_dim_;
};

}  // namespace qkv::attention
