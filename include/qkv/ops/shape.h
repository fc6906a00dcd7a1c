// qkv/ops/shape.h - differentiable shape, view and indexing ops (names and semantics as PyTorch).
//
// View ops return a tensor sharing the input's storage (a strided view, see Tensor::as_strided);
// their backward maps the gradient back through the inverse view. Axes may be negative (counted
// from the back). Bad axes, sizes and indices throw qkv::Error naming the op and the shapes.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <vector>

#include "qkv/tensor/tensor.h"

namespace qkv {

// ---- views ----
// New shape with the same numel; one extent may be -1 (inferred). A view whenever the strides
// allow it (always for contiguous x), otherwise a copy.
Tensor reshape(const Tensor& x, const std::vector<int64_t>& shape);
Tensor reshape(const Tensor& x, std::initializer_list<int64_t> shape);
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor flatten(const Tensor& x, int start = 0, int end = -1);  // merges axes start..end
Tensor permute(const Tensor& x, const std::vector<int>& dims);  // out axis i = x axis dims[i]
Tensor transpose(const Tensor& x, int a, int b);
Tensor unsqueeze(const Tensor& x, int axis);  // axis in [-ndim-1, ndim]
Tensor squeeze(const Tensor& x, int axis);    // removes axis if its extent is 1, else returns x
// Python slicing x[..., start:end:step, ...] along axis: negative start/end count from the back,
// both are clamped to [0, size]; step >= 1. The default end reaches the last element.
constexpr int64_t kSliceEnd = std::numeric_limits<int64_t>::max();
Tensor slice(const Tensor& x, int axis, int64_t start, int64_t end = kSliceEnd, int64_t step = 1);
// Broadcast view (stride 0 on new or size-1 axes) to `shape`; backward sums over those axes.
Tensor expand(const Tensor& x, const Shape& shape);
// A contiguous tensor with x's values: x itself if already contiguous, else a recorded copy.
Tensor contiguous(const Tensor& x);

// ---- joining and splitting ----
Tensor concat(const std::vector<Tensor>& xs, int axis);  // torch.cat
// Pieces of the given extents along axis (they must add up to its extent); views of x.
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int axis);
// torch.chunk: pieces of ceil(size / n) (the last may be smaller; may return fewer than n).
std::vector<Tensor> chunk(const Tensor& x, int64_t n, int axis);

// ---- indexing (index: i64 or i32) ----
// torch.gather: out[i][j][k] = x[i][index[i][j][k]][k] for axis 1; out has index's shape,
// index.size(d) <= x.size(d) for d != axis. Backward scatter-adds (duplicates accumulate).
Tensor gather(const Tensor& x, int axis, const Tensor& index);
// torch.index_select: picks the entries index[j] (1-D index) along axis. Backward index-adds.
Tensor index_select(const Tensor& x, int axis, const Tensor& index);
// cond ? a : b elementwise; cond (bool or u8), a and b broadcast together.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// x with `value` where mask (bool or u8, broadcastable to x's shape) is set.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

}  // namespace qkv
