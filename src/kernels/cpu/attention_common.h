// Private helpers shared by the attention kernels (attention_fwd/bwd/naive.cpp): strided
// (B, H, T, D) views, mask evaluation on a tile, a vectorisable exp, dropout multipliers.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "qkv/kernels/attention.h"
#include "qkv/kernels/bf16.h"
#include "qkv/kernels/gemm.h"
#include "qkv/kernels/softmax.h"
#include "qkv/tensor/rng.h"
#include "row_max.h"
#include "transpose16.h"

namespace qkv::kernels::attn {

// The fused kernels' tile products (scores, P V and their gradients) follow the caller's matmul
// precision: fp32, or under bf16 (mixed-precision training, bf16 inference) bf16 operands with f32
// accumulation by gemm_bf16_tile, as torch's autocast runs attention's matmuls in bf16. The
// precision is a thread-local that OpenMP workers do not inherit, so each call reads it once on the
// calling thread into a TileGemm that every thread of its parallel region uses (reading it inside
// the region once ran the caller's tiles in bf16 and the workers' in fp32, and results changed
// with the dynamic schedule). The bf16 tiles are qkv's own small kernel, not oneDNN: at these
// sizes oneDNN's per-call cost would exceed what bf16 saves. Softmax, its running max and sums,
// masks and dropout stay f32; only the products' operands (Q, K, V, dO, P, dS) are rounded. The
// naive path (attention weights requested: heatmaps) stays fp32.
struct TileGemm {
  bool bf16 = false;
  // Row-major C = alpha * op(A) op(B) + beta * C, beta 0 or 1 (kernels/gemm.h).
  template <typename T>
  void operator()(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
                  int64_t ldb, T beta, T* C, int64_t ldc) const {
    if constexpr (std::is_same_v<T, float>)
      if (bf16) return gemm_bf16_tile(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
};
// This call's tile products: bf16 when T is float and the calling thread's precision is bf16.
// The process's choice of bf16 kernel (bf16_products(), which may time both the first time) is
// resolved here, on the calling thread, rather than by the first worker inside the region.
template <typename T>
TileGemm tile_gemm_for_caller() {
  const bool bf16 = std::is_same_v<T, float> && matmul_precision() == MatmulPrecision::bf16;
  if (bf16) (void)bf16_products();
  return TileGemm{bf16};
}

// gemm() inside a kernel's parallel region runs fp32 on every thread (the TileGemm's fp32 path, and
// the naive kernels).
struct TilePrecision {
  MatmulPrecisionScope scope{MatmulPrecision::fp32};
};

template <typename T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// A 4-D view whose last axis is unit-stride: row(b, h, t) points at D contiguous elements.
template <typename T>
struct View {
  T* p = nullptr;
  int64_t sb = 0, sh = 0, st = 0;
  View() = default;
  explicit View(const Tensor& x) : p(x.data<T>()), sb(x.strides()[0]), sh(x.strides()[1]), st(x.strides()[2]) {}
  T* row(int64_t b, int64_t h, int64_t t) const { return p + b * sb + h * sh + t * st; }
};

struct Dims {
  int64_t B, H, Tq, Tk, Dh, Dv;
  // Multiply-adds of one pass; below 2^18 the kernels stay on one thread (a parallel
  // region costs more than the work, and much more on an oversubscribed machine).
  int64_t work() const { return B * H * Tq * Tk * (Dh + Dv); }
  bool parallel() const { return work() >= (int64_t(1) << 18); }
};
inline Dims dims_of(const Tensor& q, const Tensor& v) {
  return {q.size(0), q.size(1), q.size(2), v.size(2), q.size(3), v.size(3)};
}

using kernels::gemm;  // row-major C = alpha * op(A) op(B) + beta * C (qkv/kernels/gemm.h)

// dst (cols, rows) = src (rows, cols)^T, i.e. dst[c * ldd + r] = src[r * lds + c]. The tiles take a
// key block transposed, K_blk^T and V_blk^T, so that S = Q K^T and dP = dO V^T run as NN products:
// OpenBLAS's small NT kernel took 1.7x the NN kernel's time on the 64 x 128 x 64 score tile (10.4
// against 5.9 us on one thread), and the transpose of a 128 x 64 block costs about 1.4 us.
template <typename T>
inline void transpose_block(const T* src, int64_t lds, int64_t rows, int64_t cols, T* dst, int64_t ldd) {
  int64_t r0 = 0;
#if defined(__AVX512F__)
  if constexpr (sizeof(T) == 4) {
    for (; r0 + 16 <= rows; r0 += 16) {
      int64_t c0 = 0;
      for (; c0 + 16 <= cols; c0 += 16)
        transpose16(reinterpret_cast<const uint32_t*>(src + r0 * lds + c0), lds,
                    reinterpret_cast<uint32_t*>(dst + c0 * ldd + r0), ldd);
      for (; c0 < cols; ++c0)
        for (int64_t r = r0; r < r0 + 16; ++r) dst[c0 * ldd + r] = src[r * lds + c0];
    }
  }
#endif
  for (int64_t r = r0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * ldd + r] = src[r * lds + c];
}

// exp: kernels::vexp (qkv/kernels/softmax.h; f32 polynomial, f64 std::exp). Arguments here are
// x - row max <= 0; exp(-inf) = 0 (a fully masked entry).

// x[c] = exp(x[c] - m) for c < n; returns the sum of the results.
template <typename T>
inline T exp_sub_sum(T* x, int64_t n, T m) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t c = 0; c < n; ++c) {
    T e = vexp(x[c] - m);
    x[c] = e;
    s += e;
  }
  return s;
}

using kernels::row_max;  // -inf for a fully masked row under any compiler (row_max.h)

// The masks of AttnMask as raw pointers, with the dense mask broadcast to (B, H, Tq, Tk) strides.
template <typename T>
struct MaskCtx {
  bool causal = false;
  int64_t off = 0, Tk = 0;       // off = Tk - Tq
  const int64_t* klen = nullptr;  // (B)
  const uint8_t* kpad = nullptr;  // (B, Tk)
  const uint8_t* bmask = nullptr;
  const T* amask = nullptr;
  int64_t ms[4] = {0, 0, 0, 0};  // strides of bmask / amask over (b, h, i, j)

  MaskCtx(const AttnMask& m, const Dims& d) : causal(m.causal), off(d.Tk - d.Tq), Tk(d.Tk) {
    if (m.key_lengths.defined()) klen = m.key_lengths.data<int64_t>();
    if (m.key_padding.defined()) kpad = static_cast<const uint8_t*>(m.key_padding.raw_data());
    if (m.mask.defined()) {
      int nd = m.mask.ndim();
      for (int a = 0; a < nd; ++a) ms[4 - nd + a] = m.mask.size(a) == 1 ? 0 : m.mask.strides()[a];
      if (is_floating(m.mask.dtype())) amask = m.mask.data<T>();
      else bmask = static_cast<const uint8_t*>(m.mask.raw_data());
    }
  }
  bool dense() const { return kpad || bmask || amask; }
  int64_t key_limit(int64_t b) const { return klen ? std::clamp<int64_t>(klen[b], 0, Tk) : Tk; }
  // Keys [0, visible_end(b, i)) pass the length and causal masks for query row i.
  int64_t visible_end(int64_t b, int64_t i) const {
    int64_t e = key_limit(b);
    return causal ? std::clamp<int64_t>(i + off + 1, 0, e) : e;
  }
  // Tile of query rows [i0, i0 + rows) x keys [j0, j0 + cols): every entry masked by length/causal?
  bool tile_skipped(int64_t b, int64_t i0, int64_t rows, int64_t j0) const {
    return j0 >= visible_end(b, i0 + rows - 1);
  }
  // Columns of the tile at (i0, j0) that some of its rows see: keys at or past the last row's
  // visible end are masked for every row (visible_end grows with i), so a tile stops there. A
  // causal tile on the diagonal computes half its keys, not all of them, and the dropped columns
  // would only have added exact zeros. Positive for a tile that is not skipped.
  int64_t tile_cols(int64_t b, int64_t i0, int64_t rows, int64_t j0, int64_t block) const {
    return std::min({block, Tk - j0, visible_end(b, i0 + rows - 1) - j0});
  }
  bool tile_needs_mask(int64_t b, int64_t i0, int64_t j0, int64_t cols) const {
    return dense() || j0 + cols > visible_end(b, i0);
  }
  // Applies every mask to scaled scores S (rows x cols, leading dimension ld).
  void apply(T* S, int64_t ld, int64_t rows, int64_t cols, int64_t b, int64_t h, int64_t i0, int64_t j0) const {
    for (int64_t r = 0; r < rows; ++r) {
      int64_t i = i0 + r;
      T* s = S + r * ld;
      if (amask) {
        const T* a = amask + b * ms[0] + h * ms[1] + i * ms[2] + j0 * ms[3];
        for (int64_t c = 0; c < cols; ++c) s[c] += a[c * ms[3]];
      }
      if (bmask) {
        const uint8_t* m = bmask + b * ms[0] + h * ms[1] + i * ms[2] + j0 * ms[3];
        for (int64_t c = 0; c < cols; ++c)
          if (m[c * ms[3]]) s[c] = kNegInf<T>;
      }
      if (kpad) {
        const uint8_t* m = kpad + b * Tk + j0;
        for (int64_t c = 0; c < cols; ++c)
          if (m[c]) s[c] = kNegInf<T>;
      }
      for (int64_t c = std::max<int64_t>(visible_end(b, i) - j0, 0); c < cols; ++c) s[c] = kNegInf<T>;
    }
  }
};

// mult[c] = 0 (dropped) or 1/(1-p) (kept) for elements n0 .. n0 + cols - 1 (see AttnDropout).
template <typename T>
inline void dropout_row(const AttnDropout& d, uint64_t n0, int64_t cols, T* mult) {
  constexpr int64_t kSeg = 128;  // elements per Philox draw
  const T keep = T(1.0 / (1.0 - d.p));
  uint32_t r[kSeg + 8];  // whole Philox blocks covering one segment
  for (int64_t c0 = 0; c0 < cols; c0 += kSeg) {
    const int64_t n = std::min(kSeg, cols - c0);
    const uint64_t start = n0 + uint64_t(c0), skip = start % 4;
    philox4x32_blocks(d.seed, 0, d.offset + start / 4, int64_t((skip + uint64_t(n) + 3) / 4), r);
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) mult[c0 + c] = double(u32_to_unit_float(r[skip + uint64_t(c)])) < d.p ? T(0) : keep;
  }
}

// First dropout element index of row (b, h, i).
inline uint64_t dropout_index(const Dims& d, int64_t b, int64_t h, int64_t i) {
  return ((uint64_t(b) * uint64_t(d.H) + uint64_t(h)) * uint64_t(d.Tq) + uint64_t(i)) * uint64_t(d.Tk);
}

}  // namespace qkv::kernels::attn
