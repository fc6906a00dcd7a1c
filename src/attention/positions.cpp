#include "qkv/attention/positions.h"

#include <algorithm>
#include <cmath>

#include "qkv/nn/init.h"
#include "qkv/ops/dropout.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/matmul.h"
#include "qkv/ops/shape.h"
#include "qkv/ops/softmax.h"

namespace qkv::attention {

Tensor apply_rope(const Tensor& x, int64_t offset, double base, RopeStyle style) {
  QKV_CHECK(x.ndim() == 4 && x.size(3) % 2 == 0, "apply_rope", "expected (B, H, T, Dh) with even Dh, got ", x.str());
  QKV_CHECK(offset >= 0, "apply_rope", "offset must be >= 0, got ", offset);
  const int64_t T = x.size(2), Dh = x.size(3), half = Dh / 2;
  // cos/sin tables (T, Dh), laid out like the channels they multiply. Angles in double.
  Tensor cos_t = Tensor::empty({T, Dh}, x.dtype()), sin_t = Tensor::empty({T, Dh}, x.dtype());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < half; ++c) {
      double a = double(offset + t) * std::pow(base, -2.0 * double(c) / double(Dh));
      int64_t i0 = style == RopeStyle::half ? c : 2 * c, i1 = style == RopeStyle::half ? c + half : 2 * c + 1;
      for (int64_t i : {i0, i1}) {
        if (x.dtype() == DType::f32) {
          cos_t.data<float>()[t * Dh + i] = float(std::cos(a));
          sin_t.data<float>()[t * Dh + i] = float(std::sin(a));
        } else {
          cos_t.data<double>()[t * Dh + i] = std::cos(a);
          sin_t.data<double>()[t * Dh + i] = std::sin(a);
        }
      }
    }
  // rotated partner: (x_a, x_b) -> (-x_b, x_a)
  Tensor rot;
  if (style == RopeStyle::half) {
    rot = concat({neg(slice(x, 3, half, Dh)), slice(x, 3, 0, half)}, 3);
  } else {
    Tensor pairs = reshape(x, {x.size(0), x.size(1), T, half, 2});  // (.., c, {a, b})
    Tensor a = slice(pairs, 4, 0, 1), b = slice(pairs, 4, 1, 2);
    rot = reshape(concat({neg(b), a}, 4), x.shape());
  }
  return add(mul(x, cos_t), mul(rot, sin_t));
}

RelativeMultiHeadAttention::RelativeMultiHeadAttention(int64_t d, int64_t h, int64_t k, double p)
    : heads(h), head_dim(h > 0 ? d / h : 0), max_distance(k) {
  QKV_CHECK(h > 0 && d % h == 0, "RelativeMultiHeadAttention", "d_model ", d, " must be divisible by heads ", h);
  QKV_CHECK(k >= 1, "RelativeMultiHeadAttention", "max_distance must be >= 1, got ", k);
  q_proj = register_module("q_proj", std::make_shared<nn::Linear>(d, d));
  k_proj = register_module("k_proj", std::make_shared<nn::Linear>(d, d));
  v_proj = register_module("v_proj", std::make_shared<nn::Linear>(d, d));
  out_proj = register_module("out_proj", std::make_shared<nn::Linear>(d, d));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(p));
  rel_k = register_parameter("rel_k", Tensor::empty({2 * k + 1, head_dim}));
  rel_v = register_parameter("rel_v", Tensor::empty({2 * k + 1, head_dim}));
  nn::init::xavier_uniform(rel_k);
  nn::init::xavier_uniform(rel_v);
}

Tensor relative_distance_index(int64_t tq, int64_t tk, int64_t max_distance) {
  QKV_CHECK(tq <= tk && max_distance >= 1, "relative_distance_index", "expected Tq <= Tk and k >= 1, got Tq=", tq,
            " Tk=", tk, " k=", max_distance);
  Tensor idx = Tensor::empty({tq, tk}, DType::i64);
  int64_t* p = idx.data<int64_t>();
  for (int64_t i = 0; i < tq; ++i)
    for (int64_t j = 0; j < tk; ++j) {
      int64_t dist = j - (tk - tq + i);  // query i is at absolute position tk - tq + i
      p[i * tk + j] = std::clamp(dist, -max_distance, max_distance) + max_distance;
    }
  return idx;
}

RelativeAttentionResult relative_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& rel_k,
                                           const Tensor& rel_v, int64_t max_distance, const AttentionMask& m,
                                           double dropout_p, bool training) {
  QKV_CHECK(q.ndim() == 4 && k.ndim() == 4 && v.shape() == k.shape() && q.size(0) == k.size(0) &&
                q.size(1) == k.size(1) && q.size(3) == k.size(3),
            "relative_attention", "expected q (B, H, Tq, Dh) and k/v (B, H, Tk, Dh), got ", q.str(), ", ", k.str(),
            ", ", v.str());
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2), Dh = q.size(3);
  QKV_CHECK(rel_k.shape() == Shape({2 * max_distance + 1, Dh}) && rel_v.shape() == rel_k.shape(),
            "relative_attention", "expected rel_k/rel_v (", 2 * max_distance + 1, ", ", Dh, "), got ", rel_k.str(),
            ", ", rel_v.str());
  Tensor idx = reshape(relative_distance_index(Tq, Tk, max_distance), {-1});
  Tensor ak = reshape(index_select(rel_k, 0, idx), {Tq, Tk, Dh});  // aK_ij
  Tensor av = reshape(index_select(rel_v, 0, idx), {Tq, Tk, Dh});  // aV_ij

  // q_i . k_j, plus q_i . aK_ij computed per query position as a batched matmul over i.
  Tensor content = matmul(q, transpose(k, 2, 3));                                  // (B, H, Tq, Tk)
  Tensor q_by_pos = reshape(permute(q, {2, 0, 1, 3}), {Tq, B * H, Dh});             // (Tq, BH, Dh)
  Tensor pos = matmul(q_by_pos, transpose(ak, 1, 2));                               // (Tq, BH, Tk)
  pos = permute(reshape(pos, {Tq, B, H, Tk}), {1, 2, 0, 3});                        // (B, H, Tq, Tk)
  Tensor scores = mul(add(content, pos), 1.0 / std::sqrt(double(Dh)));

  // One boolean mask (B, 1, Tq, Tk) from causal + key padding; an additive mask is added.
  Tensor bool_mask;
  if (m.causal || m.key_padding.defined() || m.key_lengths.defined()) {
    bool_mask = Tensor::zeros({B, 1, Tq, Tk}, DType::u8);
    uint8_t* bm = bool_mask.data<uint8_t>();
    Tensor kp = m.key_padding.defined() ? m.key_padding.to(DType::u8).contiguous() : Tensor();
    std::vector<int64_t> lens = m.key_lengths.defined() ? m.key_lengths.to_vector<int64_t>() : std::vector<int64_t>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < Tq; ++i)
        for (int64_t j = 0; j < Tk; ++j) {
          bool masked = (m.causal && j > Tk - Tq + i) || (kp.defined() && kp.data<uint8_t>()[b * Tk + j]) ||
                        (!lens.empty() && j >= lens[size_t(b)]);
          bm[(b * Tq + i) * Tk + j] = masked;
        }
  }
  if (m.mask.defined()) {
    if (is_floating(m.mask.dtype())) {
      scores = add(scores, m.mask);
    } else {
      Tensor mm = expand(m.mask.to(DType::u8), Shape{B, 1, Tq, Tk}).contiguous();
      if (bool_mask.defined()) {
        uint8_t* bm = bool_mask.data<uint8_t>();
        const uint8_t* extra = mm.data<uint8_t>();
        for (int64_t i = 0; i < bool_mask.numel(); ++i) bm[i] |= extra[i];
      } else {
        bool_mask = mm;
      }
    }
  }
  Tensor w = softmax(scores, bool_mask);  // (B, H, Tq, Tk); fully masked rows are 0
  Tensor p = dropout(w, dropout_p, training);
  Tensor z = matmul(p, v);                                                         // (B, H, Tq, Dh)
  Tensor p_by_pos = reshape(permute(p, {2, 0, 1, 3}), {Tq, B * H, Tk});            // (Tq, BH, Tk)
  Tensor zpos = permute(reshape(matmul(p_by_pos, av), {Tq, B, H, Dh}), {1, 2, 0, 3});  // (B, H, Tq, Dh)
  return {add(z, zpos), w};
}

RelativeMultiHeadAttention::Output RelativeMultiHeadAttention::forward(const Tensor& query, const Tensor& key,
                                                                       const Tensor& value,
                                                                       const AttentionMask& m) const {
  QKV_CHECK(query.ndim() == 3 && key.ndim() == 3 && value.shape() == key.shape() && query.size(0) == key.size(0),
            "RelativeMultiHeadAttention", "expected query (B, Tq, D) and key/value (B, Tk, D), got ", query.str(), ", ",
            key.str(), ", ", value.str());
  const int64_t B = query.size(0), Tq = query.size(1), Tk = key.size(1), H = heads, Dh = head_dim;
  auto split_heads = [&](const Tensor& x, int64_t T) {  // (B, T, D) -> (B, H, T, Dh)
    return permute(reshape(x, {B, T, H, Dh}), {0, 2, 1, 3});
  };
  Tensor q = split_heads(q_proj->forward(query), Tq), k = split_heads(k_proj->forward(key), Tk),
         v = split_heads(v_proj->forward(value), Tk);
  auto r = relative_attention(q, k, v, rel_k, rel_v, max_distance, m, dropout->p, dropout->is_training());
  Tensor merged = reshape(permute(r.out, {0, 2, 1, 3}), {B, Tq, H * Dh});
  return {out_proj->forward(merged), r.weights};
}

}  // namespace qkv::attention
