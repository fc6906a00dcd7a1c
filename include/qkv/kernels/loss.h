// qkv/kernels/loss.h - fused cross-entropy (log-softmax + NLL + label smoothing) per row (f32, f64).
//
// logits contiguous, viewed as (N, C); targets already range-checked (or == ignore_index).
// The forward computes each row's logsumexp once (max, exp-sum with the vectorised exp) and
//   loss_i = (1 - eps) * (lse_i - x_i[t_i]) + eps * (lse_i - mean_j x_ij)   (0 for ignored rows).
// The backward recomputes p = exp(x - lse) and writes
//   gx_ij = scale_i * (p_ij - eps / C - (1 - eps) [j == t_i])                (0 for ignored rows).
// lse is kept as its two parts, stats (N, 2) = (max_i, log sum_j exp(x_ij - max_i)), and every
// x - lse is taken as (x - max) - log sum, as torch's log_softmax does: rounding lse itself to the
// logits' magnitude cost half an ulp of the largest logit (3e-4 at logits of 1e4).
#pragma once
#include <cstdint>

#include "qkv/tensor/tensor.h"

namespace qkv::kernels {

// loss (N), stats (N, 2): contiguous, logits' dtype.
void cross_entropy_forward(const Tensor& logits, const int64_t* targets, int64_t ignore_index, double smoothing,
                           Tensor& loss, Tensor& stats);
// scale_i = gy[i] * factor if gy has N elements, else gy[0] * factor. gx (N, C) contiguous.
void cross_entropy_backward(const Tensor& logits, const int64_t* targets, const Tensor& stats, int64_t ignore_index,
                            double smoothing, const Tensor& gy, double factor, Tensor& gx);
// The forward and, for gy = 1, the backward in one pass over each row (linear_cross_entropy's
// chunks): loss and stats as the forward writes them, and the logits overwritten by their gradient
// at scale factor. The forward's exponentials are kept in place and scaled by factor / sum, not
// computed again: p = exp(x - max) / sum rather than the backward's exp(x - lse).
void cross_entropy_forward_backward(Tensor& logits, const int64_t* targets, int64_t ignore_index, double smoothing,
                                    double factor, Tensor& loss, Tensor& stats);

// Negative log-likelihood of log-probabilities logp (N, C): rows[i] = -logp[i, t_i] (0 if ignored).
void nll_forward(const Tensor& logp, const int64_t* targets, int64_t ignore_index, Tensor& rows);
// gx (N, C), zero-filled by the caller: gx[i, t_i] = -gy_i * factor (gy (N) or one element).
void nll_backward(const int64_t* targets, int64_t ignore_index, const Tensor& gy, double factor, Tensor& gx);

}  // namespace qkv::kernels
