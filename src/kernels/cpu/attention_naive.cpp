// Naive attention: materialises P = softmax(scale * Q K^T + mask) (B, H, Tq, Tk), then out = (P*Z) V.
// Used when the caller asks for the weights, to replay the weights of chosen heads, and as the
// independent implementation the fused kernel is tested against. Parallel over (b, h).
#include <vector>

#include "attention_common.h"

namespace qkv::kernels {
namespace {

using namespace attn;

// Rows of s (n wide) -> softmax in place with exact exp; an all -inf row becomes zeros.
template <typename T>
void softmax_row(T* s, int64_t n) {
  const T m = row_max(s, n);
  if (m == kNegInf<T>) {
    std::fill(s, s + n, T(0));
    return;
  }
  T sum = 0;
  for (int64_t c = 0; c < n; ++c) {
    s[c] = std::exp(s[c] - m);
    sum += s[c];
  }
  const T inv = T(1) / sum;
  for (int64_t c = 0; c < n; ++c) s[c] *= inv;
}

// Pz = P * Z for one (b, h), or P itself without dropout.
template <typename T>
const T* dropped(const Dims& d, const AttnDropout& drop, int64_t b, int64_t h, const T* P, std::vector<T>& buf) {
  if (!drop.active()) return P;
  buf.resize(size_t(d.Tq * d.Tk));
  for (int64_t i = 0; i < d.Tq; ++i) {
    T* z = buf.data() + i * d.Tk;
    dropout_row(drop, dropout_index(d, b, h, i), d.Tk, z);
    for (int64_t j = 0; j < d.Tk; ++j) z[j] *= P[i * d.Tk + j];
  }
  return buf.data();
}

template <typename T>
void probs_impl(const Tensor& q, const Tensor& k, double scale, const AttnMask& mask, Tensor& probs,
                const std::vector<int64_t>& heads) {
  const Dims d{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), k.size(3)};
  const View<T> Q(q), K(k);
  const MaskCtx<T> mc(mask, d);
  const int64_t nh = probs.size(1);
  T* out = probs.data<T>();  // (B, nh, Tq, Tk)
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if (d.parallel())
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t hi = 0; hi < nh; ++hi) {
      const TilePrecision tile_precision;  // fp32 tiles on every thread (attention_common.h)
      const int64_t h = heads.empty() ? hi : heads[size_t(hi)];
      T* P = out + (b * nh + hi) * d.Tq * d.Tk;
      if (d.Tq == 0 || d.Tk == 0) continue;
      gemm(false, true, d.Tq, d.Tk, d.Dh, T(scale), Q.row(b, h, 0), Q.st, K.row(b, h, 0), K.st, T(0), P, d.Tk);
      mc.apply(P, d.Tk, d.Tq, d.Tk, b, h, 0, 0);
      for (int64_t i = 0; i < d.Tq; ++i) softmax_row(P + i * d.Tk, d.Tk);
    }
}

template <typename T>
void naive_forward_impl(const Tensor& probs, const Tensor& v, const AttnDropout& drop, Tensor& out) {
  const Dims d{probs.size(0), probs.size(1), probs.size(2), probs.size(3), 0, v.size(3)};
  const View<T> V(v), O(out);
  const T* P0 = probs.data<T>();
#pragma omp parallel if (d.parallel())
  {
    const TilePrecision tile_precision;  // fp32 tiles on every thread (attention_common.h)
    std::vector<T> buf;
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int64_t b = 0; b < d.B; ++b)
      for (int64_t h = 0; h < d.H; ++h) {
        if (d.Tq == 0) continue;
        const T* Pz = dropped(d, drop, b, h, P0 + (b * d.H + h) * d.Tq * d.Tk, buf);
        // out = Pz V   (Tq, Dv); Tk = 0 leaves zeros
        gemm(false, false, d.Tq, d.Dv, d.Tk, T(1), Pz, std::max<int64_t>(d.Tk, 1), V.row(b, h, 0), V.st, T(0),
             O.row(b, h, 0), O.st);
      }
  }
}

template <typename T>
void naive_backward_impl(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs, const Tensor& dout,
                         const Tensor& dprobs, double scale_d, const AttnDropout& drop, Tensor& dq, Tensor& dk,
                         Tensor& dv) {
  const Dims d = dims_of(q, v);
  const View<T> Q(q), K(k), V(v), dO(dout), dQ(dq), dK(dk), dV(dv);
  const T* P0 = probs.data<T>();
  const T* G0 = dprobs.defined() ? dprobs.data<T>() : nullptr;
  const T scale = T(scale_d);
#pragma omp parallel if (d.parallel())
  {
    const TilePrecision tile_precision;  // fp32 tiles on every thread (attention_common.h)
    std::vector<T> buf, dP(size_t(d.Tq * d.Tk)), z(size_t(d.Tk));
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int64_t b = 0; b < d.B; ++b)
      for (int64_t h = 0; h < d.H; ++h) {
        const int64_t base = (b * d.H + h) * d.Tq * d.Tk;
        const T* P = P0 + base;
        const T* Pz = dropped(d, drop, b, h, P, buf);
        const int64_t ld = std::max<int64_t>(d.Tk, 1);
        // dV = Pz^T dO   (Tk, Dv)
        gemm(true, false, d.Tk, d.Dv, d.Tq, T(1), Pz, ld, dO.row(b, h, 0), dO.st, T(0), dV.row(b, h, 0), dV.st);
        // dP = (dO V^T) * Z + dprobs   (Tq, Tk)
        gemm(false, true, d.Tq, d.Tk, d.Dv, T(1), dO.row(b, h, 0), dO.st, V.row(b, h, 0), V.st, T(0), dP.data(), ld);
        for (int64_t i = 0; i < d.Tq; ++i) {
          T* g = dP.data() + i * d.Tk;
          const T* p = P + i * d.Tk;
          if (drop.active()) {  // regenerate Z for this row
            dropout_row(drop, dropout_index(d, b, h, i), d.Tk, z.data());
            for (int64_t j = 0; j < d.Tk; ++j) g[j] *= z[size_t(j)];
          }
          if (G0)
            for (int64_t j = 0; j < d.Tk; ++j) g[j] += G0[base + i * d.Tk + j];
          // dS = P * (dP - rowsum(P * dP))
          T s = 0;
          for (int64_t j = 0; j < d.Tk; ++j) s += p[j] * g[j];
          for (int64_t j = 0; j < d.Tk; ++j) g[j] = p[j] * (g[j] - s);
        }
        // dQ = scale * dS K   (Tq, Dh);  dK = scale * dS^T Q   (Tk, Dh)
        gemm(false, false, d.Tq, d.Dh, d.Tk, scale, dP.data(), ld, K.row(b, h, 0), K.st, T(0), dQ.row(b, h, 0), dQ.st);
        gemm(true, false, d.Tk, d.Dh, d.Tq, scale, dP.data(), ld, Q.row(b, h, 0), Q.st, T(0), dK.row(b, h, 0), dK.st);
      }
  }
}

template <typename Fn>
void dispatch(DType t, const char* op, Fn&& fn) {
  switch (t) {
    case DType::f32: return fn(float{});
    case DType::f64: return fn(double{});
    default: fail(op, "dtype ", dtype_name(t), " is not supported (f32, f64)");
  }
}

}  // namespace

void attention_probs(const Tensor& q, const Tensor& k, double scale, const AttnMask& mask, Tensor& probs,
                     const std::vector<int64_t>& heads) {
  dispatch(q.dtype(), "attention_probs", [&](auto t) { probs_impl<decltype(t)>(q, k, scale, mask, probs, heads); });
}

void attention_naive_forward(const Tensor& probs, const Tensor& v, const AttnDropout& drop, Tensor& out) {
  dispatch(v.dtype(), "attention_naive_forward", [&](auto t) { naive_forward_impl<decltype(t)>(probs, v, drop, out); });
}

void attention_naive_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs,
                              const Tensor& dout, const Tensor& dprobs, double scale, const AttnDropout& drop,
                              Tensor& dq, Tensor& dk, Tensor& dv) {
  dispatch(q.dtype(), "attention_naive_backward", [&](auto t) {
    naive_backward_impl<decltype(t)>(q, k, v, probs, dout, dprobs, scale, drop, dq, dk, dv);
  });
}

}  // namespace qkv::kernels
