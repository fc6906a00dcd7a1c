// tests/models/logits_at.h - one position's logits of some rows of a (B, T, V) logits tensor.
#pragma once
#include <cstdint>
#include <vector>

#include "qkv/ops/shape.h"
#include "qkv/tensor/tensor.h"

namespace qkv::testing {

// Logits of position t for the given rows: (R, V).
inline Tensor logits_at(const Tensor& logits, const std::vector<int64_t>& rows, int64_t t) {
  Tensor idx = Tensor::from_vector<int64_t>(rows, {int64_t(rows.size())});
  return contiguous(reshape(slice(index_select(logits, 0, idx), 1, t, t + 1), {int64_t(rows.size()), logits.size(2)}));
}

}  // namespace qkv::testing
