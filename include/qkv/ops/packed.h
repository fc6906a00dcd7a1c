// qkv/ops/packed.h - inference-only products against weights packed once per decoding session
// (kernels::PackedLinear): the per-step projections of incremental decoding.
#pragma once
#include "qkv/kernels/gemm.h"
#include "qkv/tensor/tensor.h"

namespace qkv {

// y (..., N) = x (..., K) @ w^T + b for w packed by kernels::pack_linear(w, b). Under grad
// mode with x or the weight requiring grad it is linear(x, w.weight, w.bias) (recorded).
Tensor linear_packed(const Tensor& x, const kernels::PackedLinear& w);

}  // namespace qkv
