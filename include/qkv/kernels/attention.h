// qkv/kernels/attention.h - CPU scaled dot-product attention kernels (f32, f64).
//
//   out = dropout(softmax(scale * Q K^T + mask)) V      Q (B, H, Tq, Dh), K (B, H, Tk, Dh), V (B, H, Tk, Dv)
//
// Fused path (attention_forward/backward): FlashAttention-2 style blocked online softmax. Work is
// split into kAttnBlockQ x kAttnBlockK tiles; the Tq x Tk matrix never exists. The forward saves
// only out and the per-row logsumexp lse (B, H, Tq); the backward recomputes P tile by tile.
// Scratch per thread is O(block^2 + block * D). Results are bit-identical for any thread count.
// Naive path (attention_probs + attention_naive_*): materialises P (B, H, Tq, Tk); used when the
// caller wants the weights, and as an independent implementation for tests.
//
// Layout: q, k, v, out, dq, dk, dv are 4-D views whose last axis has stride 1; the other three
// strides are free, so a (B, T, H, D) buffer seen as (B, H, T, D) needs no copy.
// A fully masked query row gives out = 0, lse = -inf and zero gradients (never NaN).
// Kernels validate little: the op front-end (attention/sdpa.h) checks shapes and dtypes.
#pragma once
#include <cstdint>
#include <vector>

#include "qkv/tensor/tensor.h"

namespace qkv::kernels {

constexpr int64_t kAttnBlockQ = 64;   // query rows per tile
constexpr int64_t kAttnBlockK = 128;  // key columns per tile

// All optional; a position is masked if any of them masks it.
struct AttnMask {
  bool causal = false;  // query i sees keys j <= i + (Tk - Tq): aligned at the end (decoding)
  Tensor key_lengths;   // (B) i64: keys j >= key_lengths[b] are masked
  Tensor key_padding;   // (B, Tk) u8/bool, contiguous: nonzero = masked
  Tensor mask;          // broadcastable to (B, H, Tq, Tk), any strides: u8/bool (nonzero = masked)
                        // or q's dtype (added to the scaled scores; -inf masks)
};

// Attention dropout on P. Element n = ((b * H + h) * Tq + i) * Tk + j is dropped iff
// u < p, u = u32_to_unit_float(philox4x32(seed, 0, offset + n / 4)[n % 4]) - exactly the
// uniforms Generator(seed) at `offset` would draw (Generator::uniform), so the mask is a pure
// function of (seed, offset, n) and the backward regenerates it. Kept values scale by 1/(1-p).
struct AttnDropout {
  double p = 0.0;
  uint64_t seed = 0;
  uint64_t offset = 0;  // first Philox block (Generator::reserve(B * H * Tq * Tk))
  bool active() const { return p > 0.0; }
};

// ---- fused ----
// out (B, H, Tq, Dv) any 3 outer strides; lse (B, H, Tq) contiguous, q's dtype.
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const AttnMask& mask,
                       const AttnDropout& drop, Tensor& out, Tensor& lse);
// Gradients of the forward above given dout (B, H, Tq, Dv). dq, dk, dv are written (not added).
void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& dout, double scale, const AttnMask& mask, const AttnDropout& drop,
                        Tensor& dq, Tensor& dk, Tensor& dv);

// ---- naive ----
// probs (B, nh, Tq, Tk) contiguous: softmax(scale * Q K^T + mask) for heads `heads` (all H if
// empty), before dropout; fully masked rows are 0. Exact std::exp.
void attention_probs(const Tensor& q, const Tensor& k, double scale, const AttnMask& mask, Tensor& probs,
                     const std::vector<int64_t>& heads = {});
// out = dropout(probs) V, probs from attention_probs over all heads.
void attention_naive_forward(const Tensor& probs, const Tensor& v, const AttnDropout& drop, Tensor& out);
// Gradients given dout (B, H, Tq, Dv) and optionally dprobs (B, H, Tq, Tk), the gradient that
// reaches the returned weights directly (undefined = none). dq, dk, dv are written.
void attention_naive_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs,
                              const Tensor& dout, const Tensor& dprobs, double scale, const AttnDropout& drop,
                              Tensor& dq, Tensor& dk, Tensor& dv);

// ---- single query (incremental decoding, f32) ----
// One query position per row:  out[r, h] = softmax_j(scale * q[r, h] . k_j + mask) v_j, j < length,
// where k_j / v_j of row r are read from cache storage at physical row phys(r, j):
//   phys(r, j) = table[r * table_ld + j] if table, else row_map[r] if row_map, else r,
// element (phys, j, h, d) at k + phys * row_stride + j * pos_stride + h * head_dim + d (same for v).
// A table lets beam search reorder hypotheses without moving cached keys; a row_map lets all
// beams of a sentence share one copy of the projected encoder memory. key_padding (rows, length)
// u8, indexed by (logical) row: nonzero = masked. A fully masked row gives out = 0. Costs
// O(rows * heads * length * head_dim), never a length x length tile. The values are summed in
// chunks of 128 positions whose partials are added in order, so a row's bits depend on the
// length alone; a batch of one row over a longer cache splits its chunks over the threads.
struct DecodeAttention {
  const float* q = nullptr;  // (rows, heads * head_dim), row stride q_row_stride
  int64_t q_row_stride = 0;
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t row_stride = 0, pos_stride = 0;  // of k and v storage (unit stride over d, head_dim over h)
  const int32_t* table = nullptr;
  int64_t table_ld = 0;
  const int32_t* row_map = nullptr;
  const uint8_t* key_padding = nullptr;
  int64_t key_padding_ld = 0;
  float* out = nullptr;  // (rows, heads * head_dim), row stride out_row_stride
  int64_t out_row_stride = 0;
  int64_t rows = 0, heads = 0, head_dim = 0, length = 0;
  float scale = 1.f;
};
void attention_decode(const DecodeAttention& a);

}  // namespace qkv::kernels
