// Scaled dot-product attention: validating front-end, fused/naive dispatch, autograd nodes.
#include "qkv/attention/sdpa.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "qkv/autograd/node.h"
#include "qkv/kernels/attention.h"

namespace qkv {
namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

// x itself if its rows are unit-stride and do not overlap (the kernels hand them to BLAS with
// leading dimension strides()[2]), else a contiguous copy.
Tensor unit_last(const Tensor& x) {
  bool ok = (x.strides()[3] == 1 || x.size(3) <= 1) && x.strides()[2] >= x.size(3);
  return ok ? x : x.contiguous();
}

// A (B, H, T, D) tensor; laid out as (B, T, H, D) if `like` is (a view of) that layout.
Tensor empty_bhtd(int64_t B, int64_t H, int64_t T, int64_t D, DType dt, const Tensor& like = Tensor()) {
  bool heads_inner = like.defined() && H > 1 && T > 1 && like.strides()[1] < like.strides()[2];
  if (!like.defined() || heads_inner) {
    Tensor buf = Tensor::empty({B, T, H, D}, dt);
    return buf.as_strided({B, H, T, D}, {T * H * D, D, H * D, 1}, 0);
  }
  return Tensor::empty({B, H, T, D}, dt);
}

// dq, dk, dv for q, k, v: each as empty_bhtd lays it out, except that the inputs which are
// disjoint views of one buffer with the same shape and strides (the pieces of a fused projection
// split along its last axis, as MultiHeadAttention makes them: (B, H, T, Dh) with strides
// (T W, Dh, W, 1) at different column offsets of rows W wide) get the same views of one new buffer.
// The split's backward then takes that buffer whole instead of copying the pieces side by side.
std::array<Tensor, 3> empty_grads(const Tensor& q, const Tensor& k, const Tensor& v) {
  const Tensor* in[3] = {&q, &k, &v};
  std::array<Tensor, 3> out;
  // The pattern: 4-D, last axis unit-stride, heads then head dims contiguous within a row of
  // strides()[2] elements, and every piece's columns [c, c + H Dh) inside that row.
  auto pattern = [](const Tensor& x) {
    const Shape& s = x.strides();
    return x.ndim() == 4 && s[3] == 1 && s[1] == x.size(3) && s[0] == x.size(2) * s[2] && x.size(2) > 1 &&
           s[2] >= x.size(1) * x.size(3);
  };
  for (int i = 0; i < 3; ++i) {
    if (out[size_t(i)].defined() || !pattern(*in[i])) continue;
    int members[3], n = 0;  // in[i] and the later inputs that share its buffer and layout
    for (int j = i; j < 3; ++j)
      if (!out[size_t(j)].defined() && pattern(*in[j]) && in[j]->storage() == in[i]->storage() &&
          in[j]->shape() == in[i]->shape() && in[j]->strides() == in[i]->strides())
        members[n++] = j;
    const int64_t width = in[i]->strides()[2], piece = in[i]->size(1) * in[i]->size(3);
    int64_t lo = in[i]->offset();
    for (int m = 0; m < n; ++m) lo = std::min(lo, in[members[m]]->offset());
    bool disjoint = n > 1;  // columns [offset - lo, + piece) of one row, pairwise apart
    for (int a = 0; a < n && disjoint; ++a) {
      const int64_t ca = in[members[a]]->offset() - lo;
      disjoint = ca + piece <= width;
      for (int b = 0; b < a && disjoint; ++b) {
        const int64_t cb = in[members[b]]->offset() - lo;
        disjoint = ca >= cb + piece || cb >= ca + piece;
      }
    }
    if (!disjoint) continue;
    const Tensor buf = Tensor::empty(Shape{in[i]->size(0) * in[i]->strides()[0]}, in[i]->dtype());
    for (int m = 0; m < n; ++m) {
      const Tensor& x = *in[members[m]];
      out[size_t(members[m])] = buf.as_strided(x.shape(), x.strides(), x.offset() - lo);
    }
  }
  for (int i = 0; i < 3; ++i) {
    const Tensor& x = *in[i];
    if (!out[size_t(i)].defined())
      out[size_t(i)] = empty_bhtd(x.size(0), x.size(1), x.size(2), x.size(3), x.dtype(), x);
  }
  return out;
}

void check_qkv(const Tensor& q, const Tensor& k, const Tensor* v, const char* op) {
  check_floating(q, op, "q");
  check_floating(k, op, "k");
  QKV_CHECK(q.dtype() == DType::f32 || q.dtype() == DType::f64, op, "q: expected f32 or f64, got ", q.str());
  QKV_CHECK(q.ndim() == 4, op, "q: expected (B, H, Tq, Dh), got ", q.str());
  QKV_CHECK(k.ndim() == 4, op, "k: expected (B, H, Tk, Dh), got ", k.str());
  QKV_CHECK(k.dtype() == q.dtype(), op, "k: expected dtype ", dtype_name(q.dtype()), " like q, got ", k.str());
  QKV_CHECK(k.size(0) == q.size(0) && k.size(1) == q.size(1) && k.size(3) == q.size(3), op, "k: expected (",
            q.size(0), ", ", q.size(1), ", Tk, ", q.size(3), ") to match q ", q.str(), ", got ", k.str());
  if (!v) return;
  check_floating(*v, op, "v");
  QKV_CHECK(v->ndim() == 4 && v->dtype() == q.dtype(), op, "v: expected ", dtype_name(q.dtype()),
            " (B, H, Tk, Dv), got ", v->str());
  QKV_CHECK(v->size(0) == k.size(0) && v->size(1) == k.size(1) && v->size(2) == k.size(2), op, "v: expected (",
            k.size(0), ", ", k.size(1), ", ", k.size(2), ", Dv) to match k ", k.str(), ", got ", v->str());
}

// AttentionMask::packed_lengths against the attention's shape (sdpa.h).
void check_packed(const AttentionMask& m, int64_t B, int64_t Tq, int64_t Tk, const char* op) {
  QKV_CHECK(B == 1 && Tq == Tk, op, "mask.packed_lengths: expected one row (B = 1) of Tq = Tk positions, got B = ",
            B, ", Tq = ", Tq, ", Tk = ", Tk);
  QKV_CHECK(!m.key_padding.defined() && !m.key_lengths.defined() && !m.mask.defined(), op,
            "mask.packed_lengths: packed sequences have no padding; combine them with causal only");
  int64_t sum = 0;
  for (int64_t len : m.packed_lengths) {
    QKV_CHECK(len > 0, op, "mask.packed_lengths: expected positive lengths, got ", len);
    sum += len;
  }
  QKV_CHECK(sum == Tq, op, "mask.packed_lengths: the lengths sum to ", sum, ", expected Tq = ", Tq);
}

// The block diagonal of packed sequences as a u8 (T, T) mask, 1 = masked (another sequence's key).
Tensor block_diagonal_mask(const std::vector<int64_t>& lengths, int64_t T) {
  Tensor m = Tensor::full({T, T}, 1.0, DType::u8);
  uint8_t* p = m.data<uint8_t>();
  int64_t start = 0;
  for (int64_t len : lengths) {
    for (int64_t i = start; i < start + len; ++i) std::fill_n(p + i * T + start, len, uint8_t(0));
    start += len;
  }
  return m;
}

// AttentionMask -> kernel masks: validated, converted to the dtypes/layouts the kernels read.
kernels::AttnMask kernel_mask(const AttentionMask& m, int64_t B, int64_t H, int64_t Tq, int64_t Tk, DType dt,
                              const char* op) {
  kernels::AttnMask km;
  km.causal = m.causal;
  if (!m.packed_lengths.empty()) {
    check_packed(m, B, Tq, Tk, op);
    km.mask = block_diagonal_mask(m.packed_lengths, Tq);
    return km;
  }
  if (m.key_padding.defined()) {
    const Tensor& kp = m.key_padding;
    QKV_CHECK(kp.dtype() == DType::boolean || kp.dtype() == DType::u8, op, "mask.key_padding: expected bool/u8, got ",
              kp.str());
    QKV_CHECK(kp.ndim() == 2 && kp.size(0) == B && kp.size(1) == Tk, op, "mask.key_padding: expected (", B, ", ",
              Tk, "), got ", kp.str());
    km.key_padding = kp.contiguous();
  }
  if (m.key_lengths.defined()) {
    const Tensor& kl = m.key_lengths;
    QKV_CHECK(kl.dtype() == DType::i64 || kl.dtype() == DType::i32, op, "mask.key_lengths: expected i32/i64, got ",
              kl.str());
    QKV_CHECK(kl.ndim() == 1 && kl.size(0) == B, op, "mask.key_lengths: expected (", B, "), got ", kl.str());
    km.key_lengths = kl.to(DType::i64);
    for (int64_t len : km.key_lengths.to_vector<int64_t>())
      QKV_CHECK(len >= 0 && len <= Tk, op, "mask.key_lengths: expected values in [0, ", Tk, "], got ", len);
  }
  if (m.mask.defined()) {
    const Tensor& mk = m.mask;
    const DType md = mk.dtype();
    QKV_CHECK(md == DType::boolean || md == DType::u8 || md == DType::f32 || md == DType::f64, op,
              "mask.mask: expected bool/u8 or a float dtype, got ", mk.str());
    const int64_t full[4] = {B, H, Tq, Tk};
    bool ok = mk.ndim() <= 4;
    for (int a = 0; ok && a < mk.ndim(); ++a) {
      int64_t s = mk.size(a), want = full[4 - mk.ndim() + a];
      ok = s == 1 || s == want;
    }
    QKV_CHECK(ok, op, "mask.mask: expected a shape broadcastable to (", B, ", ", H, ", ", Tq, ", ", Tk, "), got ",
              mk.str());
    km.mask = is_floating(md) && md != dt ? mk.to(dt) : mk.detach();
  }
  return km;
}

kernels::AttnDropout make_dropout(double p, bool training, Generator* gen, int64_t n, const char* op) {
  QKV_CHECK(p >= 0.0 && p < 1.0, op, "dropout_p: expected a value in [0, 1), got ", p);
  kernels::AttnDropout d;
  if (!training || p == 0.0) return d;
  Generator& g = gen ? *gen : default_generator();
  d.p = p;
  d.seed = g.seed();
  d.offset = g.reserve(uint64_t(n));
  return d;
}

// Fused path: saves q, k, v, out, lse; backward runs the fused backward kernel.
struct SdpaBackward : Node {
  Tensor q, k, v, out, lse;
  kernels::AttnMask mask;
  kernels::AttnDropout drop;
  double scale = 1.0;
  const char* name() const override { return "ScaledDotProductAttentionBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    // out = dropout(softmax(scale * q k^T + mask)) v
    Tensor dout = unit_last(g[0]);
    auto [dq, dk, dv] = empty_grads(q, k, v);
    kernels::attention_backward(q, k, v, out, lse, dout, scale, mask, drop, dq, dk, dv);
    return {dq, dk, dv};
  }
  void release_saved() override { q = k = v = out = lse = Tensor(); mask = {}; }
};

// Naive path: outputs (out, weights); saves q, k, v and the weights P.
struct SdpaNaiveBackward : Node {
  Tensor q, k, v, probs;
  kernels::AttnDropout drop;
  double scale = 1.0;
  const char* name() const override { return "ScaledDotProductAttentionNaiveBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    // out = dropout(P) v, P = softmax(scale * q k^T + mask); g[1] reaches P directly
    Tensor dout = g[0].defined() ? unit_last(g[0])
                                 : Tensor::zeros({q.size(0), q.size(1), q.size(2), v.size(3)}, q.dtype());
    Tensor dprobs = g[1].defined() ? g[1].contiguous() : Tensor();
    auto [dq, dk, dv] = empty_grads(q, k, v);
    kernels::attention_naive_backward(q, k, v, probs, dout, dprobs, scale, drop, dq, dk, dv);
    return {dq, dk, dv};
  }
  void release_saved() override { q = k = v = probs = Tensor(); }
};

// Packed sequences without weights or gradients: the fused kernel on each sequence's positions
// (views of q, k, v and of one output buffer), so no query reads another sequence's keys at all.
Tensor packed_attention(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<int64_t>& lengths,
                        bool causal, double scale) {
  const int64_t H = q.size(1), T = q.size(2);
  Tensor out = empty_bhtd(1, H, T, v.size(3), q.dtype());
  kernels::AttnMask km;
  km.causal = causal;
  int64_t start = 0;
  for (int64_t len : lengths) {
    auto rows = [&](const Tensor& x) {  // positions [start, start + len) of a (1, H, T, D) view
      return x.as_strided({1, H, len, x.size(3)}, x.strides(), x.offset() + start * x.strides()[2]);
    };
    Tensor o = rows(out), lse = Tensor::empty({1, H, len}, q.dtype());
    kernels::attention_forward(rows(q), rows(k), rows(v), scale, km, {}, o, lse);
    start += len;
  }
  return out;
}

}  // namespace

SdpaResult scaled_dot_product_attention(const Tensor& q_, const Tensor& k_, const Tensor& v_, const AttentionMask& mask,
                                        double dropout_p, bool training, bool need_weights,
                                        std::optional<double> scale, Generator* gen) {
  check_defined(q_, kOp, "q");
  check_defined(k_, kOp, "k");
  check_defined(v_, kOp, "v");
  check_qkv(q_, k_, &v_, kOp);
  const Tensor q = unit_last(q_), k = unit_last(k_), v = unit_last(v_);
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2), Dv = v.size(3);
  const double sc = scale ? *scale : 1.0 / std::sqrt(double(q.size(3)));
  if (!mask.packed_lengths.empty() && !need_weights && !(training && dropout_p > 0.0) &&
      !any_requires_grad({q_, k_, v_})) {
    check_packed(mask, B, Tq, Tk, kOp);
    return {packed_attention(q, k, v, mask.packed_lengths, mask.causal, sc), Tensor()};
  }
  kernels::AttnMask km = kernel_mask(mask, B, H, Tq, Tk, q.dtype(), kOp);
  kernels::AttnDropout drop = make_dropout(dropout_p, training, gen, B * H * Tq * Tk, kOp);
  const bool record = any_requires_grad({q_, k_, v_});

  SdpaResult res;
  res.out = empty_bhtd(B, H, Tq, Dv, q.dtype());
  if (!need_weights) {
    Tensor lse = Tensor::empty({B, H, Tq}, q.dtype());
    kernels::attention_forward(q, k, v, sc, km, drop, res.out, lse);
    if (record) {
      auto node = make_node<SdpaBackward>({q_, k_, v_});
      node->q = node->save(q);
      node->k = node->save(k);
      node->v = node->save(v);
      node->out = node->save(res.out);
      node->lse = lse;
      // The mask's tensors are the caller's own unless converted: a padding mask written in place
      // before backward() would change the softmax the backward recomputes, so they are checked too.
      node->mask = km;
      node->mask.key_lengths = node->save(km.key_lengths);
      node->mask.key_padding = node->save(km.key_padding);
      node->mask.mask = node->save(km.mask);
      node->drop = drop;
      node->scale = sc;
      set_history(res.out, node);
    }
    return res;
  }
  res.weights = Tensor::empty({B, H, Tq, Tk}, q.dtype());
  kernels::attention_probs(q, k, sc, km, res.weights);
  kernels::attention_naive_forward(res.weights, v, drop, res.out);
  if (record) {
    auto node = make_node<SdpaNaiveBackward>({q_, k_, v_});
    node->num_outputs = 2;
    node->q = node->save(q);
    node->k = node->save(k);
    node->v = node->save(v);
    node->probs = node->save(res.weights);
    node->drop = drop;
    node->scale = sc;
    set_history(res.out, node, 0);
    set_history(res.weights, node, 1);
  }
  return res;
}

Tensor attention_weights(const Tensor& q_, const Tensor& k_, const AttentionMask& mask, std::optional<double> scale,
                         const std::vector<int64_t>& heads) {
  const char* op = "attention_weights";
  check_defined(q_, op, "q");
  check_defined(k_, op, "k");
  check_qkv(q_, k_, nullptr, op);
  const Tensor q = unit_last(q_), k = unit_last(k_);
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2);
  for (int64_t h : heads) QKV_CHECK(h >= 0 && h < H, op, "heads: expected indices in [0, ", H, "), got ", h);
  const double sc = scale ? *scale : 1.0 / std::sqrt(double(q.size(3)));
  kernels::AttnMask km = kernel_mask(mask, B, H, Tq, Tk, q.dtype(), op);
  Tensor probs = Tensor::empty({B, heads.empty() ? H : int64_t(heads.size()), Tq, Tk}, q.dtype());
  kernels::attention_probs(q, k, sc, km, probs, heads);
  return probs;
}

}  // namespace qkv
