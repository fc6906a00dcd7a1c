// qkv/ops/loss.h - losses (f32, f64), PyTorch semantics, with the class axis LAST.
//
// Differences from torch, on purpose:
//   - the class axis is the last one: logits (..., C) with targets (...) (torch puts C at axis 1);
//   - Reduction::mean over a batch whose targets are ALL ignore_index gives 0 with zero gradient
//     (torch gives NaN = 0/0; a fully padded batch must not poison training).
#pragma once
#include <cstdint>

#include "qkv/tensor/tensor.h"

namespace qkv {

enum class Reduction { none, sum, mean };

// Cross entropy of softmax(logits) against class indices, fused with log-softmax.
// logits (..., C) f32/f64; targets (...) i64 (or i32) in [0, C) or == ignore_index.
// Per element: loss = (1 - s) * (-logp[t]) + s * mean_j(-logp[j]), s = label_smoothing in [0, 1];
// ignored elements give 0. none -> shape (...); sum -> (); mean -> sum / (number not ignored).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                     double label_smoothing = 0.0, Reduction reduction = Reduction::mean);

// Negative log-likelihood of log-probabilities logp (..., C): loss = -logp[t], same target and
// reduction rules as cross_entropy.
Tensor nll_loss(const Tensor& logp, const Tensor& targets, int64_t ignore_index = -100,
                Reduction reduction = Reduction::mean);

// Mean squared error (a - b)^2; a and b must have the same shape and dtype. Both differentiable.
Tensor mse_loss(const Tensor& a, const Tensor& b, Reduction reduction = Reduction::mean);

}  // namespace qkv
