// qkv/ops/norm.h - layer normalisation over the last axis (f32, f64), fused forward and backward.
#pragma once
#include "qkv/tensor/tensor.h"

namespace qkv {

// y = (x - mean) / sqrt(var + eps) * weight + bias over the last axis (biased variance, like
// torch.nn.functional.layer_norm with normalized_shape = (C,)). weight and bias are (C) or
// undefined (no affine); each may be given alone. All three are differentiable.
Tensor layer_norm(const Tensor& x, const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  double eps = 1e-5);

}  // namespace qkv
