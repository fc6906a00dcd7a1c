#include "qkv/models/seq2seq.h"

#include "qkv/ops/shape.h"

namespace qkv::models {

Tensor Seq2Seq::loss(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in, const Tensor& tgt_out,
                     int64_t pad_id, double label_smoothing, Reduction reduction) {
  Tensor logits = forward(src, src_pad, tgt_in);  // (B, T, V)
  return cross_entropy(reshape(logits, {-1, logits.size(-1)}), reshape(tgt_out, {-1}), pad_id, label_smoothing,
                       reduction);
}

}  // namespace qkv::models
