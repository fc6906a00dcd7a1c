// qkv/attention/decode_attention.h - single-query attention over cached keys and values, the op
// incremental decoding calls at every step (inference only: nothing is recorded):
//
//   out[r, h] = softmax_j(scale * q[r, h] . k[s(r, j), j, h]  + pad) v[s(r, j), j, h],  j < L
//
// where s(r, j) is the storage row that holds position j of row r (DecodeRows). The tensors are
// read in place through their strides (a KV cache's storage, a projected memory permuted to
// (P, S, H, Dh)); the op checks them and builds the kernel's descriptor
// (kernels::attention_decode). Beam search reorders rows through the table or map, not by
// moving keys.
#pragma once
#include <cstdint>
#include <span>

#include "qkv/tensor/tensor.h"

namespace qkv {

// Which storage row each row reads, and which keys it never sees.
struct DecodeRows {
  // At most one of the two; neither: row r reads storage row r (P == rows).
  std::span<const int32_t> table;  // (rows, table_ld): storage row of (row r, position j) at r * table_ld + j
  int64_t table_ld = 0;
  std::span<const int32_t> map;    // (rows): storage row of every position of row r
  // (rows, key_padding_ld) u8 by row, nonzero = padding (never attended to); empty: none.
  std::span<const uint8_t> key_padding;
  int64_t key_padding_ld = 0;
};

// q (B, 1, H, Dh) f32: one query per row, any row stride, each row's heads contiguous
// (strides (*, *, Dh, 1)). k, v (P, L, H, Dh) f32 of one shape and strides, rows and positions
// at any stride, each position's heads contiguous (decode_kv_layout_ok). Returns (B, 1, H * Dh)
// contiguous. A row whose keys are all padding gets zeros.
Tensor attention_decode(const Tensor& q, const Tensor& k, const Tensor& v, const DecodeRows& rows, double scale);

// True when k and v have the layout attention_decode reads in place.
bool decode_kv_layout_ok(const Tensor& k, const Tensor& v);

}  // namespace qkv
