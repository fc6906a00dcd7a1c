// Fused attention forward: blocked online softmax (FlashAttention-2 on the CPU).
// For each (b, h, query block): for each key block, S = scale * Q_blk K_blk^T (+ masks), running
// row max m and sum l, rescale the accumulator, acc += P V_blk. Saves out and lse = m + log(l).
#include <omp.h>

#include <vector>

#include "attention_common.h"

namespace qkv::kernels {
namespace {

using namespace attn;

template <typename T>
void forward_impl(const Tensor& q, const Tensor& k, const Tensor& v, double scale_d, const AttnMask& mask,
                  const AttnDropout& drop, Tensor& out, Tensor& lse) {
  const Dims d = dims_of(q, v);
  const View<T> Q(q), K(k), V(v), O(out);
  T* L = lse.data<T>();  // (B, H, Tq)
  const MaskCtx<T> mc(mask, d);
  const T scale = T(scale_d);
  const int64_t nqb = (d.Tq + kAttnBlockQ - 1) / kAttnBlockQ;
  const int64_t tasks = d.B * d.H * nqb;
  const TileGemm mm = tile_gemm_for_caller<T>();  // read here: workers do not inherit the precision

#pragma omp parallel if (d.parallel())
  {
    const TilePrecision tile_precision;  // gemm() in fp32 on every thread (attention_common.h)
    // Per-thread scratch: S/P tile, K_blk^T, dropout multipliers, accumulator, row statistics.
    std::vector<T> S(static_cast<size_t>(kAttnBlockQ * kAttnBlockK)), mult(static_cast<size_t>(kAttnBlockK));
    std::vector<T> Kt(static_cast<size_t>(d.Dh * kAttnBlockK));
    std::vector<T> acc(static_cast<size_t>(kAttnBlockQ * d.Dv)), m(static_cast<size_t>(kAttnBlockQ)),
        l(static_cast<size_t>(kAttnBlockQ));
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t b = task / (d.H * nqb), h = task / nqb % d.H, i0 = task % nqb * kAttnBlockQ;
      const int64_t rows = std::min(kAttnBlockQ, d.Tq - i0);
      const T* Qb = Q.row(b, h, i0);
      std::fill(acc.begin(), acc.end(), T(0));
      std::fill(m.begin(), m.end(), kNegInf<T>);
      std::fill(l.begin(), l.end(), T(0));
      for (int64_t j0 = 0; j0 < d.Tk; j0 += kAttnBlockK) {
        if (mc.tile_skipped(b, i0, rows, j0)) break;  // later key blocks are masked too
        const int64_t cols = mc.tile_cols(b, i0, rows, j0, kAttnBlockK);
        // S = scale * Q_blk K_blk^T   (rows, cols), K_blk^T (Dh, cols)
        transpose_block(K.row(b, h, j0), K.st, cols, d.Dh, Kt.data(), cols);
        mm(false, false, rows, cols, d.Dh, scale, Qb, Q.st, Kt.data(), cols, T(0), S.data(), cols);
        if (mc.tile_needs_mask(b, i0, j0, cols)) mc.apply(S.data(), cols, rows, cols, b, h, i0, j0);
        for (int64_t r = 0; r < rows; ++r) {
          T* s = S.data() + r * cols;
          const T block_max = row_max(s, cols);  // NaN for a block of NaNs (row_max.h): kept, not max'ed away
          const T m_new = block_max != block_max ? block_max : std::max(m[r], block_max);
          if (m_new == kNegInf<T>) {  // every key so far masked: contributes nothing
            std::fill(s, s + cols, T(0));
            continue;
          }
          const T alpha = vexp(m[r] - m_new);  // 0 when m[r] = -inf
          l[r] = l[r] * alpha + exp_sub_sum(s, cols, m_new);
          m[r] = m_new;
          if (alpha != T(1)) {
            T* a = acc.data() + r * d.Dv;
            for (int64_t c = 0; c < d.Dv; ++c) a[c] *= alpha;
          }
          if (drop.active()) {
            dropout_row(drop, dropout_index(d, b, h, i0 + r) + uint64_t(j0), cols, mult.data());
            for (int64_t c = 0; c < cols; ++c) s[c] *= mult[c];
          }
        }
        // acc += P V_blk   (rows, Dv)
        mm(false, false, rows, d.Dv, cols, T(1), S.data(), cols, V.row(b, h, j0), V.st, T(1), acc.data(), d.Dv);
      }
      for (int64_t r = 0; r < rows; ++r) {
        T* o = O.row(b, h, i0 + r);
        const T* a = acc.data() + r * d.Dv;
        T* lr = L + (b * d.H + h) * d.Tq + i0 + r;
        if (m[r] != kNegInf<T>) {  // l >= 1 (the largest score's term), or NaN, which the output keeps
          const T inv = T(1) / l[r];
          for (int64_t c = 0; c < d.Dv; ++c) o[c] = a[c] * inv;
          *lr = m[r] + std::log(l[r]);
        } else {  // fully masked row
          std::fill(o, o + d.Dv, T(0));
          *lr = kNegInf<T>;
        }
      }
    }
  }
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const AttnMask& mask,
                       const AttnDropout& drop, Tensor& out, Tensor& lse) {
  switch (q.dtype()) {
    case DType::f32: return forward_impl<float>(q, k, v, scale, mask, drop, out, lse);
    case DType::f64: return forward_impl<double>(q, k, v, scale, mask, drop, out, lse);
    default: fail("attention_forward", "dtype ", dtype_name(q.dtype()), " is not supported (f32, f64)");
  }
}

}  // namespace qkv::kernels
