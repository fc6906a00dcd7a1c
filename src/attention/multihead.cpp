#include "qkv/attention/multihead.h"

#include <algorithm>

#include "qkv/autograd/node.h"
#include "qkv/kernels/bf16_step_weights.h"
#include "qkv/ops/matmul.h"
#include "qkv/ops/packed.h"
#include "qkv/ops/shape.h"

namespace qkv::attention {

// ---------------------------------------------------------------- MultiHeadAttention

MultiHeadAttention::MultiHeadAttention(int64_t d_model, int64_t heads, double dropout, bool bias, int64_t kdim,
                                       int64_t vdim, nn::init::Scheme scheme)
    : dropout(dropout), d_model_(d_model), heads_(heads) {
  QKV_CHECK(d_model > 0 && heads > 0 && d_model % heads == 0, "MultiHeadAttention",
            "d_model must be a positive multiple of heads, got d_model=", d_model, " heads=", heads);
  QKV_CHECK(dropout >= 0.0 && dropout < 1.0, "MultiHeadAttention", "dropout must be in [0, 1), got ", dropout);
  head_dim_ = d_model / heads;
  if (kdim < 0) kdim = d_model;
  if (vdim < 0) vdim = d_model;
  q_proj = register_module("q_proj", std::make_shared<nn::Linear>(d_model, d_model, bias, scheme));
  k_proj = register_module("k_proj", std::make_shared<nn::Linear>(kdim, d_model, bias, scheme));
  v_proj = register_module("v_proj", std::make_shared<nn::Linear>(vdim, d_model, bias, scheme));
  out_proj = register_module("out_proj", std::make_shared<nn::Linear>(d_model, d_model, bias, scheme));
}

Tensor MultiHeadAttention::split_heads(const Tensor& x) const {
  // (B, T, d_model) -> (B, T, H, Dh) -> (B, H, T, Dh): a view, last axis unit-stride (sdpa takes it as is).
  return permute(reshape(x, {x.size(0), x.size(1), heads_, head_dim_}), {0, 2, 1, 3});
}

std::shared_ptr<const kernels::PackedLinear> MultiHeadAttention::packed_qkv() const {
  return q_proj->bias.defined() ? packed_qkv_.get({q_proj->weight, k_proj->weight, v_proj->weight},
                                                  {q_proj->bias, k_proj->bias, v_proj->bias})
                                : packed_qkv_.get({q_proj->weight, k_proj->weight, v_proj->weight});
}

Tensor MultiHeadAttention::project_qkv(const Tensor& x) const {
  if (use_cached_low_precision(x, q_proj->weight)) return linear_packed(x, *packed_qkv());  // (B, T, 3D)
  Tensor w = concat({q_proj->weight, k_proj->weight, v_proj->weight}, 0);  // (3D, D)
  kernels::Bf16StepWeights::adopt(w);  // mixed-precision training: converted once per step and role, blocked
  Tensor b = q_proj->bias.defined() ? concat({q_proj->bias, k_proj->bias, v_proj->bias}, 0) : Tensor();
  return linear(x, w, b);  // (B, T, 3D)
}

MhaOutput MultiHeadAttention::attend_heads(const Tensor& q, const Tensor& k, const Tensor& v,
                                           const AttentionMask& mask, bool need_weights) const {
  AttentionRecord* rec = recorder_;
  if (rec) {
    ++rec->calls;
    rec->q = q, rec->k = k, rec->mask = mask, rec->weights = Tensor();
  }
  using Naive = AttentionRecord::Naive;
  const bool naive = need_weights || (rec && rec->naive == Naive::instead);
  auto [o, w] = scaled_dot_product_attention(q, k, v, mask, dropout, is_training(), naive);  // (B, H, Tq, Dh)
  if (rec && rec->naive == Naive::instead) rec->weights = w;
  if (rec && rec->naive == Naive::beside)
    rec->weights = scaled_dot_product_attention(q, k, v, mask, dropout, is_training(), true).weights;
  if (!need_weights) w = Tensor();
  // sdpa returns a view of a (B, Tq, H, Dh) buffer: the permute back is contiguous and the merge free.
  Tensor merged = reshape(contiguous(permute(o, {0, 2, 1, 3})), {q.size(0), q.size(2), d_model_});  // (B, Tq, D)
  return {out_proj->forward(merged), w};
}

void MultiHeadAttention::set_positions(const AttentionPositions& p) {
  QKV_CHECK(positions_.kind == AttentionPositions::Kind::none, "MultiHeadAttention::set_positions",
            "positions are already set");
  if (p.kind == AttentionPositions::Kind::rope)
    QKV_CHECK(head_dim_ % 2 == 0 && p.rope_base > 0, "MultiHeadAttention", "rotary positions need an even head_dim "
              "and a positive base, got head_dim=", head_dim_, " base=", p.rope_base);
  if (p.kind == AttentionPositions::Kind::relative) {
    QKV_CHECK(p.max_distance >= 1, "MultiHeadAttention", "relative positions need max_distance >= 1, got ",
              p.max_distance);
    relative_key = register_parameter("relative_key", Tensor::zeros({2 * p.max_distance + 1, head_dim_}));
    relative_value = register_parameter("relative_value", Tensor::zeros({2 * p.max_distance + 1, head_dim_}));
  }
  positions_ = p;
}

MhaOutput MultiHeadAttention::attend_positional(const Tensor& q, const Tensor& k, const Tensor& v,
                                                const AttentionMask& mask, bool need_weights,
                                                bool packed_out) const {
  if (positions_.kind != AttentionPositions::Kind::relative) {
    if (!packed_out) return attend_heads(q, k, v, mask, need_weights);
    auto [o, w] = scaled_dot_product_attention(q, k, v, mask, dropout, is_training(), need_weights);
    Tensor merged = reshape(contiguous(permute(o, {0, 2, 1, 3})), {q.size(0), q.size(2), d_model_});
    return {out_proj->forward_packed(merged), w};
  }
  auto r = relative_attention(q, k, v, relative_key, relative_value, positions_.max_distance, mask, dropout,
                              is_training());  // (B, H, Tq, Dh)
  if (recorder_) {  // no replay for relative scores: keep the weights this path computes anyway
    ++recorder_->calls;
    recorder_->q = Tensor(), recorder_->k = Tensor(), recorder_->mask = mask, recorder_->weights = r.weights;
  }
  Tensor merged = reshape(contiguous(permute(r.out, {0, 2, 1, 3})), {q.size(0), q.size(2), d_model_});  // (B, Tq, D)
  return {packed_out ? out_proj->forward_packed(merged) : out_proj->forward(merged),
          need_weights ? r.weights : Tensor()};
}

namespace {
void check_input(const Tensor& x, int64_t dim, const char* what) {
  QKV_CHECK(x.defined() && x.ndim() == 3 && x.size(2) == dim, "MultiHeadAttention",
            what, " must be (B, T, ", dim, "), got ", x.defined() ? x.str() : std::string("undefined"));
}
}  // namespace

MhaOutput MultiHeadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                      const AttentionMask& mask, bool need_weights) const {
  check_input(query, d_model_, "query");
  check_input(key, k_proj->weight.size(1), "key");
  check_input(value, v_proj->weight.size(1), "value");
  QKV_CHECK(key.size(0) == query.size(0) && value.size(0) == query.size(0) && key.size(1) == value.size(1),
            "MultiHeadAttention", "batch/length mismatch: query ", query.str(), ", key ", key.str(), ", value ",
            value.str());
  if (positions_.kind != AttentionPositions::Kind::none) {
    // Positional self-attention: queries are the last Tq of the Tk key positions 0 .. Tk-1.
    QKV_CHECK(mask.packed_lengths.empty(), "MultiHeadAttention", "packed sequences (mask.packed_lengths) are not "
              "supported with rotary or relative positions: they would count positions across sequences");
    const bool self = query.same(key) && key.same(value);
    Tensor q, k, v;
    if (self) {  // one GEMM against [W_q; W_k; W_v] as below
      auto qkv = split(project_qkv(query), {d_model_, d_model_, d_model_}, 2);
      q = split_heads(qkv[0]), k = split_heads(qkv[1]), v = split_heads(qkv[2]);  // (B, H, T, Dh)
    } else {
      q = split_heads(q_proj->forward(query)), k = split_heads(k_proj->forward(key)),
      v = split_heads(v_proj->forward(value));
    }
    if (positions_.kind == AttentionPositions::Kind::rope) {
      q = apply_rope(q, key.size(1) - query.size(1), positions_.rope_base, positions_.rope_style);
      k = apply_rope(k, 0, positions_.rope_base, positions_.rope_style);
    }
    return attend_positional(q, k, v, mask, need_weights);
  }
  if (query.same(key) && key.same(value) && k_proj->weight.size(1) == d_model_ && v_proj->weight.size(1) == d_model_) {
    // Self-attention: the three projections as one GEMM against [W_q; W_k; W_v] (3D, D), as
    // torch's packed in_proj. q/k/v are strided views of the (B, T, 3D) result; sdpa takes them
    // without a copy and its gradients come back through split/concat.
    auto qkv = split(project_qkv(query), {d_model_, d_model_, d_model_}, 2);  // 3 x (B, T, D)
    return attend_heads(split_heads(qkv[0]), split_heads(qkv[1]), split_heads(qkv[2]), mask, need_weights);
  }
  Tensor q = split_heads(q_proj->forward(query));  // (B, H, Tq, Dh)
  if (key.same(value) && k_proj->weight.size(1) == v_proj->weight.size(1) && !use_cached_low_precision(key, k_proj->weight)) {
    // Cross-attention over one memory: K and V projections as one GEMM against [W_k; W_v].
    // (bf16 / int8 inference projects through k_proj and v_proj, whose forms are cached.)
    Tensor w = concat({k_proj->weight, v_proj->weight}, 0);  // (2D, kdim)
    kernels::Bf16StepWeights::adopt(w);
    Tensor b = k_proj->bias.defined() ? concat({k_proj->bias, v_proj->bias}, 0) : Tensor();
    auto kv = split(linear(key, w, b), {d_model_, d_model_}, 2);  // 2 x (B, Tk, D)
    return attend_heads(q, split_heads(kv[0]), split_heads(kv[1]), mask, need_weights);
  }
  Tensor k = split_heads(k_proj->forward(key));    // (B, H, Tk, Dh)
  Tensor v = split_heads(v_proj->forward(value));  // (B, H, Tk, Dh)
  return attend_heads(q, k, v, mask, need_weights);
}

}  // namespace qkv::attention
