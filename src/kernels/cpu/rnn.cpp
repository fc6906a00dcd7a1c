// LSTM / GRU layer kernels: GEMMs through kernels::gemm, the per-step gate math fused and
// vectorised (sigmoid and tanh built on vexp, branch-free, so GCC vectorises the loops over H).
#include "qkv/kernels/rnn.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "qkv/kernels/bf16.h"
#include "qkv/kernels/gemm.h"
#include "qkv/kernels/softmax.h"
#include "dispatch.h"

namespace qkv::kernels {
namespace {

// Elements per step below which the gate kernel stays serial (thread start-up costs more).
constexpr int64_t kGateGrain = 8192;

inline float sigm(float x) { return 1.0f / (1.0f + vexp(-x)); }
inline double sigm(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// tanh as Cephes tanhf: an odd polynomial below |x| = 0.625 (where 1 - 2/(e^2x + 1) would
// cancel), else 1 - 2/(e^2|x| + 1) with the sign restored. ~2 ulp.
inline float tanh_(float x) {
  float a = std::fabs(x);
  float s = x * x;
  float p = ((((-5.70498872745e-3f * s + 2.06390887954e-2f) * s - 5.37397155531e-2f) * s + 1.33314422036e-1f) * s -
             3.33332819422e-1f) * s * x + x;
  float e = 1.0f - 2.0f / (vexp(2.0f * a) + 1.0f);
  e = x < 0.0f ? -e : e;
  return a < 0.625f ? p : e;
}
inline double tanh_(double x) { return std::tanh(x); }

inline bool active(const RnnLayerDims& d, int64_t b, int64_t t) { return d.len == nullptr || t < d.len[b]; }

// Each gate kernel is a row function (restrict-qualified parameters: GCC honours restrict only
// there, and without it the loop needs more alias checks than it will version for) called per
// active batch row by a step function that also handles inactive rows.

// ---- forward rows: g holds one row's pre-activations; they become activations ----

// i f g o = sig, sig, tanh, sig (pre);  c = f c + i g;  h = o tanh(c);  y = h.
template <typename T>
void lstm_row(int64_t H, T* __restrict g, T* __restrict h, T* __restrict c, T* __restrict y) {
  for (int64_t j = 0; j < H; ++j) {
    T i = sigm(g[j]), f = sigm(g[H + j]), gc = tanh_(g[2 * H + j]), o = sigm(g[3 * H + j]);
    T cn = f * c[j] + i * gc;
    T hn = o * tanh_(cn);
    g[j] = i, g[H + j] = f, g[2 * H + j] = gc, g[3 * H + j] = o;
    c[j] = cn, h[j] = hn, y[j] = hn;
  }
}

// g: W_i x + b_i; gh: W_h h + b_h (3H each).
// r z = sig(g + gh);  n = tanh(g_n + r gh_n);  h = n + z (h - n) (torch's form of (1-z) n + z h).
template <typename T>
void gru_row(int64_t H, T* __restrict g, const T* __restrict gh, T* __restrict hn_out, T* __restrict h,
             T* __restrict y) {
  for (int64_t j = 0; j < H; ++j) {
    T r = sigm(g[j] + gh[j]), z = sigm(g[H + j] + gh[H + j]);
    T hn = gh[2 * H + j];
    T n = tanh_(g[2 * H + j] + r * hn);
    T hv = n + z * (h[j] - n);
    g[j] = r, g[H + j] = z, g[2 * H + j] = n;
    hn_out[j] = hn, h[j] = hv, y[j] = hv;
  }
}

// ---- backward rows: dh holds dL/dh_t from later steps; they leave the direct part of
// dL/dh_{t-1} there (the caller's GEMM with W_hh adds the rest) ----

// dc_t = dc + dh o (1 - tanh^2 c_t);  dpre = (dc_t g i(1-i), dc_t c_{t-1} f(1-f), dc_t i (1-g^2),
// dh tanh(c_t) o(1-o));  dc_{t-1} = dc_t f;  direct dh_{t-1} = 0.  dh includes dL/dy_t (gy).
template <typename T>
void lstm_row_back(int64_t H, const T* __restrict g, const T* __restrict cp, const T* __restrict gy,
                   T* __restrict dg, T* __restrict dh, T* __restrict dc) {
  for (int64_t j = 0; j < H; ++j) {
    T i = g[j], f = g[H + j], gc = g[2 * H + j], o = g[3 * H + j];
    T dht = dh[j] + gy[j];
    T tc = tanh_(f * cp[j] + i * gc);  // c_t, recomputed
    T dct = dc[j] + dht * o * (T(1) - tc * tc);
    dg[j] = dct * gc * i * (T(1) - i);
    dg[H + j] = dct * cp[j] * f * (T(1) - f);
    dg[2 * H + j] = dct * i * (T(1) - gc * gc);
    dg[3 * H + j] = dht * tc * o * (T(1) - o);
    dc[j] = dct * f;
    dh[j] = T(0);
  }
}

// h = n + z (h_{t-1} - n):  dn = dh (1 - z), dz = dh (h_{t-1} - n), direct dh_{t-1} = dh z;
// dpre_n = dn (1 - n^2) (x side), r gets dpre_n gh_n;  the h side of n is dpre_n r.
template <typename T>
void gru_row_back(int64_t H, const T* __restrict g, const T* __restrict hp, const T* __restrict hn,
                  const T* __restrict gy, T* __restrict dgx, T* __restrict dgh, T* __restrict dh) {
  for (int64_t j = 0; j < H; ++j) {
    T r = g[j], z = g[H + j], n = g[2 * H + j];
    T dht = dh[j] + gy[j];
    T dpn = dht * (T(1) - z) * (T(1) - n * n);
    T dpr = dpn * hn[j] * r * (T(1) - r);
    T dpz = dht * (hp[j] - n) * z * (T(1) - z);
    dgx[j] = dpr, dgx[H + j] = dpz, dgx[2 * H + j] = dpn;
    dgh[j] = dpr, dgh[H + j] = dpz, dgh[2 * H + j] = dpn * r;
    dh[j] = dht * z;
  }
}

// ---- steps. Internal buffers are time-major (T, B, C): a step's rows are one contiguous
// (B, C) block, the operand of its GEMM. (Batch-first (B, T, 4H) with H = 512 would put the
// rows 256 KiB apart, all in the same cache sets: the LSTM bench ran 1.6x slower.) y and gy are
// batch-first (B, T, H): row b of step t at (b * T + t) * H. ----

// g (B, 4H) step t's pre-activations; h, c (B, H) the state.
template <typename T>
void lstm_step(const RnnLayerDims& d, int64_t t, T* g, T* h, T* c, T* y) {
  const int64_t H = d.H, G = 4 * H;
#pragma omp parallel for schedule(static) if (d.B * H >= kGateGrain)
  for (int64_t b = 0; b < d.B; ++b) {
    T* yr = y + (b * d.T + t) * H;
    if (active(d, b, t)) lstm_row(H, g + b * G, h + b * H, c + b * H, yr);
    else std::fill(yr, yr + H, T(0));
  }
}

// g (B, 3H) step t's x projections; gh (B, 3H) its h projections; hn (B, H) receives gh_n.
template <typename T>
void gru_step(const RnnLayerDims& d, int64_t t, T* g, const T* gh, T* hn, T* h, T* y) {
  const int64_t H = d.H, G = 3 * H;
#pragma omp parallel for schedule(static) if (d.B * H >= kGateGrain)
  for (int64_t b = 0; b < d.B; ++b) {
    T* yr = y + (b * d.T + t) * H;
    if (active(d, b, t)) gru_row(H, g + b * G, gh + b * G, hn + b * H, h + b * H, yr);
    else std::fill(yr, yr + H, T(0));
  }
}

// g, dg (B, 4H) and cp (B, H) at step t; gy (B, T, H), or one zero row (gys = 0) when y got
// no gradient. Inactive rows: zero dpre, dh and dc untouched.
template <typename T>
void lstm_step_back(const RnnLayerDims& d, int64_t t, const T* g, const T* cp, const T* gy, int64_t gys, T* dg, T* dh,
                    T* dc) {
  const int64_t H = d.H, G = 4 * H;
#pragma omp parallel for schedule(static) if (d.B * H >= kGateGrain)
  for (int64_t b = 0; b < d.B; ++b) {
    if (active(d, b, t)) lstm_row_back(H, g + b * G, cp + b * H, gy + gys * (b * d.T + t), dg + b * G, dh + b * H, dc + b * H);
    else std::fill(dg + b * G, dg + (b + 1) * G, T(0));
  }
}

template <typename T>
void gru_step_back(const RnnLayerDims& d, int64_t t, const T* g, const T* hp, const T* hn, const T* gy, int64_t gys,
                   T* dgx, T* dgh, T* dh) {
  const int64_t H = d.H, G = 3 * H;
#pragma omp parallel for schedule(static) if (d.B * H >= kGateGrain)
  for (int64_t b = 0; b < d.B; ++b) {
    if (active(d, b, t)) {
      gru_row_back(H, g + b * G, hp + b * H, hn + b * H, gy + gys * (b * d.T + t), dgx + b * G, dgh + b * G, dh + b * H);
    } else {
      std::fill(dgx + b * G, dgx + (b + 1) * G, T(0));
      std::fill(dgh + b * G, dgh + (b + 1) * G, T(0));
    }
  }
}

// dst (D1, D0, C) = src (D0, D1, C) with the first two axes swapped (batch-first <-> time-major).
template <typename T>
void swap01(const T* src, int64_t D0, int64_t D1, int64_t C, T* dst) {
#pragma omp parallel for schedule(static) if (D0 * D1 * C >= (int64_t(1) << 18))
  for (int64_t i = 0; i < D0; ++i)
    for (int64_t j = 0; j < D1; ++j) std::memcpy(dst + (j * D0 + i) * C, src + (i * D1 + j) * C, size_t(C) * sizeof(T));
}

// out (N) = column sums of m (R, N) (bias gradients), in a fixed order.
template <typename T>
void col_sums(const T* m, int64_t R, int64_t N, T* out) {
  constexpr int64_t kBlock = 256;
#pragma omp parallel for schedule(static) if (R * N >= (int64_t(1) << 16))
  for (int64_t j0 = 0; j0 < N; j0 += kBlock) {
    int64_t j1 = std::min(N, j0 + kBlock);
    T* __restrict o = out + j0;
    std::fill(o, o + (j1 - j0), T(0));
    for (int64_t r = 0; r < R; ++r) {
      const T* __restrict row = m + r * N + j0;
      for (int64_t j = 0; j < j1 - j0; ++j) o[j] += row[j];
    }
  }
}

template <typename T>
void forward_impl(const RnnLayerDims& d, const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& w_ih,
                  const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh, bool save, Tensor& y, Tensor& h_n,
                  Tensor& c_n, RnnSaved& s) {
  const bool lstm = d.kind == RnnKind::lstm;
  const int64_t B = d.B, Tn = d.T, I = d.I, H = d.H, G = rnn_gates(d.kind) * H, BT = B * Tn;
  DType dt = x.dtype();
  // The recurrent products stay fp32 whatever the matmul precision: a bf16 GEMM here would round
  // W_ih and W_hh again on every call (every decoding step); no cached bf16 form of them exists.
  MatmulPrecisionScope fp32(MatmulPrecision::fp32);
  s.x_tm = Tensor::empty({Tn, B, I}, dt);
  swap01(x.data<T>(), B, Tn, I, s.x_tm.data<T>());
  s.gates = Tensor::empty({Tn, B, G}, dt);
  s.hprev = save ? Tensor::empty({Tn, B, H}, dt) : Tensor();
  // GRU: W_hn h + b_hn of each step is needed by the gate kernel, and by the backward when saving.
  s.aux = save ? Tensor::empty({Tn, B, H}, dt) : (lstm ? Tensor() : Tensor::empty({1, B, H}, dt));
  T* gp = s.gates.data<T>();

  // gates (T*B, G) = x (T*B, I) W_ih^T + bias; the bias (LSTM: b_ih + b_hh, GRU: b_ih) seeds C.
  bool has_bias = b_ih.defined();
  if (has_bias) {
    const T* bi = b_ih.data<T>();
    const T* bh = lstm ? b_hh.data<T>() : nullptr;
    T* row0 = gp;
    for (int64_t j = 0; j < G; ++j) row0[j] = bh ? bi[j] + bh[j] : bi[j];
#pragma omp parallel for schedule(static) if (BT * G >= (int64_t(1) << 18))
    for (int64_t r = 1; r < BT; ++r) std::memcpy(gp + r * G, row0, size_t(G) * sizeof(T));
  }
  gemm(false, true, BT, G, I, T(1), s.x_tm.data<T>(), I, w_ih.data<T>(), I, has_bias ? T(1) : T(0), gp, G);
  if (!save) s.x_tm = Tensor();

  T* h = h_n.data<T>();  // the running state lives in the outputs
  std::memcpy(h, h0.data<T>(), size_t(B * H) * sizeof(T));
  T* c = nullptr;
  if (lstm) {
    c = c_n.data<T>();
    std::memcpy(c, c0.data<T>(), size_t(B * H) * sizeof(T));
  }
  Tensor gh_t;  // GRU: (B, 3H) hidden projection of one step
  if (!lstm) gh_t = Tensor::empty({B, G}, dt);
  const T* whh = w_hh.data<T>();
  T* yp = y.data<T>();

  for (int64_t step = 0; step < Tn; ++step) {
    int64_t t = d.reverse ? Tn - 1 - step : step;
    T* g = gp + t * B * G;  // (B, G)
    if (save) {
      std::memcpy(s.hprev.data<T>() + t * B * H, h, size_t(B * H) * sizeof(T));
      if (lstm) std::memcpy(s.aux.data<T>() + t * B * H, c, size_t(B * H) * sizeof(T));
    }
    if (lstm) {
      gemm(false, true, B, G, H, T(1), h, H, whh, H, T(1), g, G);  // g += h_{t-1} (B, H) W_hh^T
      lstm_step(d, t, g, h, c, yp);
    } else {
      T* gh = gh_t.data<T>();
      if (b_hh.defined()) {
        for (int64_t b = 0; b < B; ++b) std::memcpy(gh + b * G, b_hh.data<T>(), size_t(G) * sizeof(T));
      }
      gemm(false, true, B, G, H, T(1), h, H, whh, H, b_hh.defined() ? T(1) : T(0), gh, G);
      gru_step(d, t, g, gh, s.aux.data<T>() + (save ? t * B * H : 0), h, yp);
    }
  }
}

template <typename T>
void backward_impl(const RnnLayerDims& d, const Tensor& w_ih, const Tensor& w_hh, const RnnSaved& s, const Tensor& g_y,
                   const Tensor& g_hn, const Tensor& g_cn, const RnnLayerGrads& out) {
  const bool lstm = d.kind == RnnKind::lstm;
  const int64_t B = d.B, Tn = d.T, I = d.I, H = d.H, G = rnn_gates(d.kind) * H, BT = B * Tn;
  DType dt = w_ih.dtype();
  // dpre (T, B, G): for the LSTM the x and h sides share it; the GRU's h side differs in n.
  Tensor dgx = Tensor::empty({Tn, B, G}, dt);
  Tensor dgh = lstm ? dgx : Tensor::empty({Tn, B, G}, dt);
  Tensor dh = g_hn.defined() ? g_hn.clone() : Tensor::zeros({B, H}, dt);  // dL/dh_t, (B, H)
  Tensor dc;
  if (lstm) dc = g_cn.defined() ? g_cn.clone() : Tensor::zeros({B, H}, dt);
  Tensor gy = g_y.defined() ? g_y : Tensor::zeros({H}, dt);  // a zero row stands for "no gradient"
  const T* gyp = gy.data<T>();
  const int64_t gys = g_y.defined() ? H : 0;
  const T* gp = s.gates.data<T>();
  const T* whh = w_hh.data<T>();
  T* dhp = dh.data<T>();

  for (int64_t step = Tn - 1; step >= 0; --step) {
    int64_t t = d.reverse ? Tn - 1 - step : step;
    const int64_t gt = t * B * G, ht = t * B * H;  // offsets of step t's blocks
    if (lstm) {
      lstm_step_back(d, t, gp + gt, s.aux.data<T>() + ht, gyp, gys, dgx.data<T>() + gt, dhp, dc.data<T>());
    } else {
      gru_step_back(d, t, gp + gt, s.hprev.data<T>() + ht, s.aux.data<T>() + ht, gyp, gys, dgx.data<T>() + gt,
                    dgh.data<T>() + gt, dhp);
    }
    if (step > 0 || out.h0) {  // dh_{t-1} += dpre_t (B, G) W_hh (G, H)
      gemm(false, false, B, H, G, T(1), dgh.data<T>() + gt, G, whh, H, T(1), dhp, H);
    }
  }
  if (out.h0) out.h0->copy_from(dh);
  if (out.c0 && lstm) out.c0->copy_from(dc);
  // Over all T*B rows at once (inactive steps contribute zero rows):
  if (out.w_hh) gemm(true, false, G, H, BT, T(1), dgh.data<T>(), G, s.hprev.data<T>(), H, T(0), out.w_hh->data<T>(), H);
  if (out.w_ih) gemm(true, false, G, I, BT, T(1), dgx.data<T>(), G, s.x_tm.data<T>(), I, T(0), out.w_ih->data<T>(), I);
  if (out.x) {
    Tensor dx_tm = Tensor::empty({Tn, B, I}, dt);
    gemm(false, false, BT, I, G, T(1), dgx.data<T>(), G, w_ih.data<T>(), I, T(0), dx_tm.data<T>(), I);
    swap01(dx_tm.data<T>(), Tn, B, I, out.x->data<T>());
  }
  if (out.b_ih) col_sums(dgx.data<T>(), BT, G, out.b_ih->data<T>());
  if (out.b_hh) {
    if (lstm && out.b_ih) out.b_hh->copy_from(*out.b_ih);  // the same sum
    else col_sums(dgh.data<T>(), BT, G, out.b_hh->data<T>());
  }
}

}  // namespace

void rnn_layer_forward(const RnnLayerDims& d, const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& w_ih,
                       const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh, bool save, Tensor& y, Tensor& h_n,
                       Tensor& c_n, RnnSaved& saved) {
  dispatch_float(x.dtype(), "rnn_layer_forward", [&](auto t) {
    forward_impl<decltype(t)>(d, x, h0, c0, w_ih, w_hh, b_ih, b_hh, save, y, h_n, c_n, saved);
  });
}

void rnn_layer_backward(const RnnLayerDims& d, const Tensor& w_ih, const Tensor& w_hh, const RnnSaved& saved,
                        const Tensor& g_y, const Tensor& g_hn, const Tensor& g_cn, const RnnLayerGrads& out) {
  dispatch_float(w_ih.dtype(), "rnn_layer_backward", [&](auto t) {
    backward_impl<decltype(t)>(d, w_ih, w_hh, saved, g_y, g_hn, g_cn, out);
  });
}

}  // namespace qkv::kernels
