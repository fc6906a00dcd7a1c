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

// cross_entropy(linear(x, weight, bias), targets, ...) without the logits in memory: an LM head's
// (N, V) logits and their gradient are the largest tensors of a small model's step (cfg1 of the
// GPT bench: 4,096 x 8,192 f32, 128 MiB each). Rows go through in chunks of chunk_rows (0: about
// 2^23 logits a chunk): logits, loss rows and, when recording, the gradient of the logits in
// their place, multiplied at once into dx and accumulated into dW and db (chunks in a fixed
// order, so runs repeat bit for bit). The backward scales those gradients by the upstream scalar.
// x (..., D), weight (V, D), bias (V) or undefined, targets (...) as cross_entropy's; reduction
// sum or mean (the gradients are made before gy is known, so per-row losses are refused). The
// products follow the matmul precision as linear's do. Its backward runs once (no retain_graph).
Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& targets,
                            int64_t ignore_index = -100, double label_smoothing = 0.0,
                            Reduction reduction = Reduction::mean, int64_t chunk_rows = 0);

// Negative log-likelihood of log-probabilities logp (..., C): loss = -logp[t], same target and
// reduction rules as cross_entropy.
Tensor nll_loss(const Tensor& logp, const Tensor& targets, int64_t ignore_index = -100,
                Reduction reduction = Reduction::mean);

// Mean squared error (a - b)^2; a and b must have the same shape and dtype. Both differentiable.
Tensor mse_loss(const Tensor& a, const Tensor& b, Reduction reduction = Reduction::mean);

}  // namespace qkv
