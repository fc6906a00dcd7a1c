// qkv/kernels/reduce.h - CPU reductions over one block of axes (f32, f64).
//
// A contiguous tensor viewed as (outer, R, inner) is reduced over R. ops/reduce.h reduces any set
// of axes by coalescing it into such blocks. Sums accumulate in double in a fixed order that does
// not depend on the thread count (outputs are split among threads; a single huge sum is split into
// fixed-size chunks whose partials are added in chunk order), so results are bit-reproducible.
#pragma once
#include "qkv/tensor/tensor.h"

namespace qkv::kernels {

// out(outer, inner) = scale * sum_r x(outer, r, inner). x, out contiguous, same dtype.
void sum_block(const Tensor& x, int64_t outer, int64_t R, int64_t inner, double scale, Tensor& out);

// values(outer, inner) = max_r x(outer, r, inner), indices (i64) = the first r attaining it.
// NaN counts as the maximum (propagates, like torch.max). values may be null (argmax only).
void max_block(const Tensor& x, int64_t outer, int64_t R, int64_t inner, Tensor* values, Tensor& indices);

// gx(outer, R, inner) = gy(outer, inner) where r == indices(outer, inner), else 0. gx contiguous.
void max_block_backward(const Tensor& gy, const Tensor& indices, int64_t outer, int64_t R, int64_t inner,
                        Tensor& gx);

}  // namespace qkv::kernels
