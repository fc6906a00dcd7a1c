// qkv/ops/softmax.h - softmax and log_softmax over the LAST axis (f32, f64), with an optional mask.
//
// Mask semantics (the mask broadcasts to x, numpy rules):
//   - bool or u8 mask: true (non-zero) = MASKED OUT, i.e. that logit is treated as -inf (like
//     torch.nn.MultiheadAttention's bool attn_mask / key_padding_mask). Masked positions get
//     softmax 0, log_softmax -inf and zero gradient.
//   - f32/f64 mask (same dtype as x): ADDITIVE, added to the logits (-inf allowed). It is
//     differentiable: its gradient is the logits' gradient summed over its broadcast axes.
// A fully masked row (every logit masked / -inf) gives softmax 0 (not NaN), log_softmax -inf, and
// zero gradient for x in both. (PyTorch gives NaN there; an attention row with no visible key is
// normal for padded queries, so zeros are the useful answer.)
#pragma once
#include "qkv/tensor/tensor.h"

namespace qkv {

Tensor softmax(const Tensor& x, const Tensor& mask = Tensor());
Tensor log_softmax(const Tensor& x, const Tensor& mask = Tensor());

}  // namespace qkv
