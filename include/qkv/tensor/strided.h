// qkv/tensor/strided.h - row-major walks over strided views.
// for_each_row(shape, strides..., fn) calls fn(offsets..., n, inner_strides...) once per innermost
// row, so the caller's inner loop is a plain strided loop the compiler can vectorise.
#pragma once
#include <array>
#include <cstdint>

#include "qkv/tensor/shape.h"

namespace qkv {

// Iterates the rows (all but the last axis) of `shape`; for each, calls
// fn(off[0..K), inner_len) where off[k] is that row's starting offset under strides[k].
template <size_t K, typename Fn>
void for_each_row(const Shape& shape, const std::array<const Shape*, K>& strides, Fn&& fn) {
  int nd = shape.ndim();
  if (shape.numel() == 0) return;
  if (nd == 0) {
    std::array<int64_t, K> off{};
    fn(off, int64_t(1));
    return;
  }
  int64_t inner = shape[nd - 1];
  int64_t rows = shape.numel() / inner;
  std::array<int64_t, kMaxDims> idx{};
  std::array<int64_t, K> off{};
  for (int64_t r = 0; r < rows; ++r) {
    fn(off, inner);
    for (int d = nd - 2; d >= 0; --d) {  // odometer increment over the outer axes
      if (++idx[d] < shape[d]) {
        for (size_t k = 0; k < K; ++k) off[k] += (*strides[k])[d];
        break;
      }
      for (size_t k = 0; k < K; ++k) off[k] -= (*strides[k])[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

// Offset of row-major flat index `flat` in a view with the given shape and strides.
inline int64_t strided_offset(int64_t flat, const Shape& shape, const Shape& strides) {
  int64_t off = 0;
  for (int d = shape.ndim() - 1; d >= 0; --d) {
    off += (flat % shape[d]) * strides[d];
    flat /= shape[d];
  }
  return off;
}

}  // namespace qkv
