// qkv/ops/matmul.h - differentiable matrix products (f32, f64) through kernels::gemm (BLAS).
#pragma once
#include "qkv/tensor/tensor.h"

namespace qkv {

// torch.matmul semantics:
//   1-D @ 1-D -> scalar (dot);  2-D @ 2-D -> (M, N);  1-D @ 2-D -> (N);  2-D @ 1-D -> (M);
//   N-D: a (..., M, K) @ b (..., K, N) -> (broadcast(...), M, N), a 1-D operand gets a unit
//   axis prepended (a) / appended (b) that is removed from the result.
// Transposed views (last two strides (1, ld)) go to BLAS as transpose flags without a copy; other
// non-BLAS layouts are copied once. Backward: da = dy b^T, db = a^T dy, summed over broadcast
// batch axes, again through transpose flags.
Tensor matmul(const Tensor& a, const Tensor& b);

// y (..., out) = x (..., in) @ w^T + b, w (out, in) and b (out) as in torch.nn.functional.linear;
// b may be undefined (no bias). The leading axes of x are one GEMM's rows; the bias is fused
// (C starts as the bias rows, beta = 1).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());

}  // namespace qkv
