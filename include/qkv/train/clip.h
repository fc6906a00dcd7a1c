// qkv/train/clip.h - gradient clipping by global L2 norm (torch.nn.utils.clip_grad_norm_).
#pragma once
#include <vector>

#include "qkv/tensor/tensor.h"

namespace qkv {

// total = || concat(p.grad() for p in params) ||_2 (parameters without a grad are skipped);
// if max_norm / (total + 1e-6) < 1 every grad is scaled by it in place. Returns total.
// The sum is taken in double over fixed blocks, so it is the same bits for any thread count.
// A non-finite total throws if error_if_nonfinite, else the grads are scaled like torch does.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, bool error_if_nonfinite = false);

// clip_grad_norm's second half, for a caller that computed `total` = grad_norm(params) itself
// (the trainer checks it for NaN/Inf first): scales every grad by max_norm / (total + 1e-6) if
// that is below 1. clip_grad_norm(p, m) = scale_grads_to_norm(p, m, grad_norm(p)), bit for bit.
void scale_grads_to_norm(const std::vector<Tensor>& params, double max_norm, double total);

// The global L2 norm of the grads alone (no clipping).
double grad_norm(const std::vector<Tensor>& params);

}  // namespace qkv
