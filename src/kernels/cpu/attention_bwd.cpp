// Fused attention backward (FlashAttention-2): recomputes P = exp(S - lse) tile by tile.
// Differentiates out = (P * Z) V with P = softmax(S), S = scale * Q K^T + mask, Z the dropout
// multipliers:
//   dV = (P*Z)^T dO,  dP = (dO V^T) * Z,  dS = P * (dP - D), D = rowsum(dO * out),
//   dQ = scale * dS K,  dK = scale * dS^T Q.
// Each tile adds into dK, dV of its key block and dQ of its query block. Sums run in a fixed
// order (query blocks ascending into dK/dV, key blocks ascending into dQ) whatever the schedule,
// so results are bit-identical for any thread count:
//  - many heads: one pass, a thread owns a whole (b, h) and writes dQ, dK, dV of it;
//  - few heads: pass 1 parallel over (b, h, key block) for dK, dV; pass 2 over (b, h, query
//    block) for dQ (recomputes P once more, but keeps both threads busy).
#include <omp.h>

#include <vector>

#include "attention_common.h"

namespace qkv::kernels {
namespace {

using namespace attn;

template <typename T>
struct Bwd {
  Dims d;
  View<T> Q, K, V, dO, dQ, dK, dV;
  const T* L;      // (B, H, Tq) logsumexp
  const T* Drow;   // (B, H, Tq) rowsum(dO * out)
  const MaskCtx<T>& mc;
  const AttnDropout& drop;
  T scale;
  TileGemm mm;  // the caller's tile precision (attention_common.h)

  struct Scratch {
    std::vector<T> P, Pd, dP, mult;
    std::vector<T> Kt, Vt;  // K_blk^T (Dh, cols), V_blk^T (Dv, cols) of the key block below
    int64_t bh = -1, j0 = -1, cols = 0;
    explicit Scratch(const Dims& d)
        : P(size_t(kAttnBlockQ * kAttnBlockK)), Pd(P.size()), dP(P.size()), mult(size_t(kAttnBlockK)),
          Kt(size_t(d.Dh * kAttnBlockK)), Vt(size_t(d.Dv * kAttnBlockK)) {}
  };

  // One tile: query rows [i0, i0 + rows) x keys [j0, j0 + cols).
  void tile(Scratch& w, int64_t b, int64_t h, int64_t i0, int64_t j0, bool want_dkdv, bool want_dq) const {
    const int64_t rows = std::min(kAttnBlockQ, d.Tq - i0);
    if (mc.tile_skipped(b, i0, rows, j0)) return;
    const int64_t cols = mc.tile_cols(b, i0, rows, j0, kAttnBlockK);
    T* P = w.P.data();
    T* dP = w.dP.data();
    const T* Qb = Q.row(b, h, i0);
    const T* Kb = K.row(b, h, j0);
    const T* dOb = dO.row(b, h, i0);
    if (w.bh != b * d.H + h || w.j0 != j0 || w.cols != cols) {  // the loops reuse a key block's transposes
      transpose_block(Kb, K.st, cols, d.Dh, w.Kt.data(), cols);
      transpose_block(V.row(b, h, j0), V.st, cols, d.Dv, w.Vt.data(), cols);
      w.bh = b * d.H + h, w.j0 = j0, w.cols = cols;
    }
    // S = scale * Q_blk K_blk^T + mask; P = exp(S - lse)   (rows, cols)
    mm(false, false, rows, cols, d.Dh, scale, Qb, Q.st, w.Kt.data(), cols, T(0), P, cols);
    if (mc.tile_needs_mask(b, i0, j0, cols)) mc.apply(P, cols, rows, cols, b, h, i0, j0);
    const T* Lr = L + (b * d.H + h) * d.Tq + i0;
    for (int64_t r = 0; r < rows; ++r) {
      T* p = P + r * cols;
      if (Lr[r] == kNegInf<T>) {  // fully masked row: no gradient
        std::fill(p, p + cols, T(0));
        continue;
      }
      const T lr = Lr[r];
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) p[c] = vexp(p[c] - lr);
    }
    const T* Pz = P;  // P * Z
    if (drop.active()) {
      T* Pd = w.Pd.data();
      for (int64_t r = 0; r < rows; ++r) {
        dropout_row(drop, dropout_index(d, b, h, i0 + r) + uint64_t(j0), cols, w.mult.data());
        for (int64_t c = 0; c < cols; ++c) Pd[r * cols + c] = P[r * cols + c] * w.mult[c];
      }
      Pz = Pd;
    }
    // dV_blk += (P*Z)^T dO_blk   (cols, Dv)
    if (want_dkdv) mm(true, false, cols, d.Dv, rows, T(1), Pz, cols, dOb, dO.st, T(1), dV.row(b, h, j0), dV.st);
    // dP = dO_blk V_blk^T   (rows, cols)
    mm(false, false, rows, cols, d.Dv, T(1), dOb, dO.st, w.Vt.data(), cols, T(0), dP, cols);
    const T* Dr = Drow + (b * d.H + h) * d.Tq + i0;
    for (int64_t r = 0; r < rows; ++r) {
      T* g = dP + r * cols;
      const T* p = P + r * cols;
      const T Di = Dr[r];
      if (drop.active()) {
        const T* pz = Pz + r * cols;
        // dP * Z * P = (P*Z) * dP: reuse the dropped probabilities (Z = 0 or 1/(1-p)).
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) g[c] = pz[c] * g[c] - p[c] * Di;
      } else {
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) g[c] = p[c] * (g[c] - Di);
      }
    }
    // dK_blk += scale * dS^T Q_blk   (cols, Dh);  dQ_blk += scale * dS K_blk   (rows, Dh)
    if (want_dkdv) mm(true, false, cols, d.Dh, rows, scale, dP, cols, Qb, Q.st, T(1), dK.row(b, h, j0), dK.st);
    if (want_dq) mm(false, false, rows, d.Dh, cols, scale, dP, cols, Kb, K.st, T(1), dQ.row(b, h, i0), dQ.st);
  }
};

// Zeroes x's (B, H, T_, D) rows: a worksharing loop of the enclosing parallel region (no barrier).
template <typename T>
void zero_rows_nowait(const View<T>& x, const Dims& d, int64_t T_, int64_t D) {
#pragma omp for collapse(2) schedule(static) nowait
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t t = 0; t < T_; ++t) std::fill(x.row(b, h, t), x.row(b, h, t) + D, T(0));
}

template <typename T>
void backward_impl(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                   const Tensor& dout, double scale, const AttnMask& mask, const AttnDropout& drop, Tensor& dq,
                   Tensor& dk, Tensor& dv) {
  const Dims d = dims_of(q, v);
  const MaskCtx<T> mc(mask, d);
  const View<T> O(out), dO(dout);
  std::vector<T> Drow(size_t(d.B * d.H * d.Tq));  // D = rowsum(dO * out)   (B, H, Tq)
  const Bwd<T> bw{d, View<T>(q), View<T>(k), View<T>(v), dO, View<T>(dq), View<T>(dk), View<T>(dv),
                  lse.data<T>(), Drow.data(), mc, drop, T(scale), tile_gemm_for_caller<T>()};
  const int64_t nqb = (d.Tq + kAttnBlockQ - 1) / kAttnBlockQ, nkb = (d.Tk + kAttnBlockK - 1) / kAttnBlockK;
  const int64_t heads = d.B * d.H, threads = d.parallel() ? omp_get_max_threads() : 1;
  const bool by_heads = heads % threads == 0 || heads >= 4 * threads;
  // One parallel region for the whole backward (a region's start costs the idle threads' wake-up).
#pragma omp parallel if (d.parallel())
  {
    // D's rows, and dQ, dK, dV zeroed (the tiles accumulate into them); then a barrier.
#pragma omp for collapse(2) schedule(static) nowait
    for (int64_t b = 0; b < d.B; ++b)
      for (int64_t h = 0; h < d.H; ++h)
        for (int64_t i = 0; i < d.Tq; ++i) {
          const T *o = O.row(b, h, i), *g = dO.row(b, h, i);
          T s = 0;
          for (int64_t c = 0; c < d.Dv; ++c) s += o[c] * g[c];
          Drow[size_t((b * d.H + h) * d.Tq + i)] = s;
        }
    zero_rows_nowait(bw.dQ, d, d.Tq, d.Dh);
    zero_rows_nowait(bw.dK, d, d.Tk, d.Dh);
    zero_rows_nowait(bw.dV, d, d.Tk, d.Dv);
#pragma omp barrier
    const TilePrecision tile_precision;  // gemm() in fp32 on every thread (attention_common.h)
    typename Bwd<T>::Scratch w(d);
    if (by_heads) {
#pragma omp for schedule(static)
      for (int64_t bh = 0; bh < heads; ++bh)
        for (int64_t kb = 0; kb < nkb; ++kb)
          for (int64_t qb = 0; qb < nqb; ++qb)
            bw.tile(w, bh / d.H, bh % d.H, qb * kAttnBlockQ, kb * kAttnBlockK, true, true);
    } else {
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < heads * nkb; ++task) {
        const int64_t bh = task / nkb, kb = task % nkb;
        for (int64_t qb = 0; qb < nqb; ++qb)
          bw.tile(w, bh / d.H, bh % d.H, qb * kAttnBlockQ, kb * kAttnBlockK, true, false);
      }
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < heads * nqb; ++task) {
        const int64_t bh = task / nqb, qb = task % nqb;
        for (int64_t kb = 0; kb < nkb; ++kb)
          bw.tile(w, bh / d.H, bh % d.H, qb * kAttnBlockQ, kb * kAttnBlockK, false, true);
      }
    }
  }
}

}  // namespace

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& dout, double scale, const AttnMask& mask, const AttnDropout& drop,
                        Tensor& dq, Tensor& dk, Tensor& dv) {
  switch (q.dtype()) {
    case DType::f32: return backward_impl<float>(q, k, v, out, lse, dout, scale, mask, drop, dq, dk, dv);
    case DType::f64: return backward_impl<double>(q, k, v, out, lse, dout, scale, mask, drop, dq, dk, dv);
    default: fail("attention_backward", "dtype ", dtype_name(q.dtype()), " is not supported (f32, f64)");
  }
}

}  // namespace qkv::kernels
