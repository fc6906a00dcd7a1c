// qkv/kernels/index.h - CPU kernels for gather / index_select / where and their backward.
// The ops/ front-ends (ops/shape.h) validate shapes, dtypes and index ranges before calling;
// these assume valid input. Forward kernels copy elements of any dtype; the backward
// (scatter-add) kernels take f32 / f64 and accumulate serially in index order, so duplicate
// indices give the same bits for any thread count.
#pragma once
#include <vector>

#include "qkv/tensor/tensor.h"

namespace qkv::kernels {

// out (index shape, contiguous) = x gathered along axis (torch.gather); x any strided view.
void gather(const Tensor& x, int axis, const Tensor& index, Tensor& out);
// gx (contiguous, x's shape) += g scattered along axis by index (the backward of gather).
void scatter_add(Tensor& gx, int axis, const Tensor& index, const Tensor& g);
// out (contiguous) = x's entries index[j] along axis (torch.index_select); index 1-D.
void index_select(const Tensor& x, int axis, const Tensor& index, Tensor& out);
// gx (contiguous) [.., index[j], ..] += g [.., j, ..] (the backward of index_select).
void index_add(Tensor& gx, int axis, const Tensor& index, const Tensor& g);
// out (contiguous, broadcast shape) = cond ? a : b; cond bool/u8, a and b one dtype, all
// three broadcast to out's shape (any strides).
void where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out);

// Embedding lookup: out (N, D) row n = weight (V, D) row ids[n] (any dtype; ids in range; a bf16
// table into an f32 out is widened).
void embedding_forward(const Tensor& weight, const std::vector<int64_t>& ids, Tensor& out);
// gw (V, D) += gy (N, D) row n at row ids[n], except ids[n] == padding_idx (f32, f64). Threads own
// column tiles and walk the ids in order, so the sums do not depend on the thread count.
void embedding_backward(const Tensor& gy, const std::vector<int64_t>& ids, int64_t padding_idx, Tensor& gw);

}  // namespace qkv::kernels
