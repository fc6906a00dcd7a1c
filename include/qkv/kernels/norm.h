// qkv/kernels/norm.h - fused layer normalisation over the last axis (f32, f64).
//
// x is contiguous, viewed as (rows, C). The forward computes each row's mean and rstd = 1/sqrt(var
// + eps) (biased variance; one pass of shifted sums in double) and writes
// y = (x - mean) * rstd * w + b in the same sweep. The backward recomputes xhat from the saved
// mean/rstd and produces dx per row; dweight/dbias are summed over fixed blocks of rows whose
// partials are added in block order, so they do not depend on the thread count.
#pragma once
#include "qkv/tensor/tensor.h"

namespace qkv::kernels {

// w, b: (C) or undefined (no affine). y: (rows, C); mean, rstd: (rows), same dtype as x.
void layer_norm_forward(const Tensor& x, const Tensor& w, const Tensor& b, double eps, Tensor& y, Tensor& mean,
                        Tensor& rstd);
// gx (rows, C) always; gw / gb (C) when non-null (gw needs w defined).
void layer_norm_backward(const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd, const Tensor& gy,
                         Tensor& gx, Tensor* gw, Tensor* gb);

}  // namespace qkv::kernels
