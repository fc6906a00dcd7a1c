// qkv/ops/embedding.h - embedding lookup (gather of weight rows), differentiable w.r.t. weight.
#pragma once
#include <cstdint>

#include "qkv/tensor/tensor.h"

namespace qkv {

// ids: i32 or i64, any shape (...); weight: (V, D) f32/f64  ->  (..., D) with out[i] = weight[ids[i]].
// The backward scatter-adds into dweight in id order (deterministic for any thread count); rows
// at padding_idx (if 0 <= padding_idx < V; -1 = none) get zero gradient, as in torch.
// An id outside [0, V) throws qkv::Error naming the id, its position and V.
Tensor embedding(const Tensor& ids, const Tensor& weight, int64_t padding_idx = -1);

}  // namespace qkv
