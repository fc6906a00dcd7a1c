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
#include <vector>

#include "qkv/attention/decode_attention.h"
#include "qkv/attention/positions.h"
#include "qkv/attention/sdpa.h"
#include "qkv/nn/layers.h"

namespace qkv::attention {

// Self-attention keys and values of the positions decoded so far (incremental decoding; rows
// are hypotheses). Storage (rows, capacity, H, Dh), grown by doubling, so appending a position
// costs O(rows H Dh). Positions are appended to every row in lockstep and never overwritten, so
// select_rows (beam-search reordering) moves no keys while the number of rows stays the same:
// a (rows, capacity) table records which storage row holds each row's position j.
// Key padding: append may mark positions of some rows as padding (a batch of prompts of different
// lengths, left-padded); those keys are never attended to by that row, at any later step. The
// (rows, capacity) u8 mask belongs to the logical row and moves with it in select_rows. Implemented
// with MultiHeadAttention's decoding methods in src/attention/decoding.cpp.
class KVCache {
 public:
  // (rows, H, length, Dh): a view of the storage while each row reads its own storage row
  // (no reordering yet), else a gathered copy.
  Tensor k() const;
  Tensor v() const;
  int64_t length() const { return length_; }
  int64_t rows() const { return k_.defined() ? k_.size(0) : 0; }
  // k_new, v_new (B, t, H, Dh): appended at positions length .. length + t - 1.
  // key_padding (B, t) u8/bool, nonzero = padding (or undefined: all real).
  void append(const Tensor& k_new, const Tensor& v_new, const Tensor& key_padding = {});
  // Keeps rows `index` (i64 (R), repeats allowed) in that order (beam search reordering).
  void select_rows(const Tensor& index);
  void clear();

  // ---- for attention_decode (decode_attention.h) ----
  // (rows, length, H, Dh) views of the storage (rows, capacity, H, Dh): what storage row s holds
  // at each position; decode_rows() says which storage row each row reads.
  Tensor k_stored() const;
  Tensor v_stored() const;
  DecodeRows decode_rows() const;  // the row table and key padding (rows, capacity), if any
  int64_t capacity() const { return k_.defined() ? k_.size(1) : 0; }
  // (rows, capacity): the storage row holding (row, position), or nullptr when row r reads
  // storage row r at every position.
  const int32_t* row_table() const { return table_.empty() ? nullptr : table_.data(); }
  // The key padding as a (rows, length) u8 tensor for the general attention path (undefined if none).
  Tensor key_padding_mask() const;

 private:
  Tensor gather(const Tensor& buf) const;  // (rows, length, H, Dh), row r from its table entries
  Tensor k_, v_;  // (rows, capacity, H, Dh)
  std::vector<int32_t> table_;  // (rows, capacity) or empty (identity)
  std::vector<uint8_t> pad_;    // (rows, capacity) by logical row, or empty (no padding)
  int64_t length_ = 0;
};

// Projected keys and values of a fixed memory (the encoder output), for cross-attention.
// Beam search repeats and reorders rows; every beam of a sentence reads the same memory row, so
// select_rows only composes a row map and never copies K/V.
struct ProjectedKV {
  Tensor k, v;  // (P, H, S, Dh) each: the projected memory of P sentences
  std::vector<int32_t> row_map;  // row r attends to memory row row_map[r]; empty: row r to row r
  int64_t rows() const { return row_map.empty() ? (k.defined() ? k.size(0) : 0) : int64_t(row_map.size()); }
  void select_rows(const Tensor& index);  // i64 (R)
  ProjectedKV gathered() const;  // k, v with one row per row (the map applied), empty map
  // k, v as the (P, S, H, Dh) storage views attention_decode reads, with the row map.
  Tensor k_stored() const;
  Tensor v_stored() const;
};

// Position information applied inside the attention (self-attention layers; positions.h):
//   rope:     q and k rotated at their absolute positions (keys before they enter a KVCache);
//   relative: Shaw et al.'s learned key/value vectors per clipped distance, shared by the heads,
//             parameters "relative_key" and "relative_value" (2 max_distance + 1, head_dim).
// Queries and keys are at positions 0 .. T-1 in forward; in step, the new positions follow the
// cached ones (query i of t at cache.length() - t + i after the append).
struct AttentionPositions {
  enum class Kind { none, rope, relative };
  Kind kind = Kind::none;
  double rope_base = 10000.0;
  RopeStyle rope_style = RopeStyle::interleaved;
  int64_t max_distance = 16;  // relative: Shaw's clipping distance k
};

// What one MultiHeadAttention call attended with, kept for showing attention (tasks/attention_view.h).
// The model runs as it always does (the fused kernel, no weights) and the record keeps the queries
// and keys the kernel saw, after positions were applied, with the mask: attention_weights(q, k,
// mask, {}, heads) then replays the exact weights of the heads wanted (sdpa.h). References for
// tests: naive = Naive::beside also runs the naive path on the same q, k, v (its output dropped,
// the model still continues with the kernel's) and keeps its weights; Naive::instead makes the
// model take the naive path (weights materialised, its output used downstream). Relative
// positions (Shaw) have no replay: their call always keeps its weights. The last call wins:
// record one forward pass (the decoding steps would overwrite it).
struct AttentionRecord {
  enum class Naive { none, beside, instead };
  Naive naive = Naive::none;
  Tensor q, k;           // (B, H, Tq, Dh), (B, H, Tk, Dh): what the kernel saw (replay)
  AttentionMask mask;
  Tensor weights;        // (B, H, Tq, Tk): naive path or relative positions, else undefined
  int64_t calls = 0;
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
  // The same, with new_key_padding (B, t) u8 (1 = padding): those new positions are recorded as
  // padding in the cache and never attended to (left-padded batches of prompts). A query at a
  // padding position that sees only padding gets zeros.
  MhaOutput step(const Tensor& x_new, KVCache& cache, const Tensor& new_key_padding, bool need_weights = false) const;
  // The projected K/V of a memory (B, S, kdim/vdim), computed once per source sentence.
  ProjectedKV project_kv(const Tensor& key, const Tensor& value) const;
  // Attention of query (B, Tq, d_model) over precomputed K/V.
  MhaOutput attend(const Tensor& query, const ProjectedKV& kv, const AttentionMask& mask = {},
                   bool need_weights = false) const;

  // Makes this a positional self-attention (see AttentionPositions). Relative tables are created
  // zero; the owner initialises them.
  void set_positions(const AttentionPositions& p);
  const AttentionPositions& positions() const { return positions_; }
  Tensor relative_key, relative_value;  // (2 max_distance + 1, head_dim), relative positions only

  // Records every forward() call into `r` (or stops recording: nullptr). r must outlive the calls.
  void set_recorder(AttentionRecord* r) { recorder_ = r; }

  int64_t d_model() const { return d_model_; }
  int64_t heads() const { return heads_; }
  int64_t head_dim() const { return head_dim_; }

  std::shared_ptr<nn::Linear> q_proj, k_proj, v_proj, out_proj;
  double dropout;

 protected:
  void on_pack_layout(kernels::PackLayout layout, kernels::MatmulPrecision precision) override {
    packed_qkv_.set_layout(layout, precision);
  }
  // [W_q; W_k; W_v] one after another in one held storage: the stacked pack reads it in place.
  void on_hold_weights(DType as) override {
    nn::hold_in({q_proj->weight, k_proj->weight, v_proj->weight}, as);
    packed_qkv_.clear();
  }

 private:
  Tensor split_heads(const Tensor& x) const;  // (B, T, d_model) -> (B, H, T, Dh) view
  // One query position, f32, no weights, no attention dropout: kernels::attention_decode applies.
  bool single_query_ok(const Tensor& query, bool need_weights) const;
  MhaOutput attend_heads(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask,
                         bool need_weights) const;  // q/k/v (B, H, T, Dh) -> projected output
  // q (B, H, Tq, Dh), k/v (B, H, Tk, Dh) with the positions applied (rotated or relative scores).
  // packed_out: the output projection through out_proj's packed weight (the decoding steps).
  MhaOutput attend_positional(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask,
                              bool need_weights, bool packed_out = false) const;
  // attention_decode of q (rows, 1, H, Dh) over the cache -> (rows, 1, d_model) before the
  // output projection.
  Tensor decode_one_query(const Tensor& q, const KVCache& cache) const;
  // [W_q; W_k; W_v] (3D, D) and the three biases packed for the decoding steps' one fused
  // projection, repacked whenever a source changed (PackedWeights, ops/packed.h). It stays here, not in
  // nn::Linear: the stacked matrix belongs to no single Linear (W_o is out_proj->packed()).
  PackedWeights packed_qkv_;
  std::shared_ptr<const kernels::PackedLinear> packed_qkv() const;  // packed_qkv_ for the current precision
  // x (B, T, D) @ [W_q; W_k; W_v]^T + b -> (B, T, 3D): one GEMM (recorded); in bf16 / int8 inference
  // (use_cached_low_precision) against packed_qkv(), converted once.
  Tensor project_qkv(const Tensor& x) const;
  int64_t d_model_, heads_, head_dim_;
  AttentionPositions positions_;
  AttentionRecord* recorder_ = nullptr;
};

}  // namespace qkv::attention
