// qkv/ops/reduce.h - differentiable reductions (f32, f64).
//
// Axes may be negative; an empty list means every axis. Results are deterministic for a given
// input (sums accumulate in double in an order independent of the thread count).
#pragma once
#include <vector>

#include "qkv/tensor/tensor.h"

namespace qkv {

// Sum over `axes` ({} = all). keepdim keeps reduced axes with extent 1.
Tensor sum(const Tensor& x, std::vector<int> axes = {}, bool keepdim = false);
// Mean over `axes` ({} = all); a mean over zero elements is NaN (like torch).
Tensor mean(const Tensor& x, std::vector<int> axes = {}, bool keepdim = false);
// Largest value along `axis`. The gradient flows to the first maximal element (like torch.max(dim)).
Tensor max(const Tensor& x, int axis, bool keepdim = false);
// Index (i64) of the first largest value along `axis`; not differentiable.
Tensor argmax(const Tensor& x, int axis, bool keepdim = false);

}  // namespace qkv
