// Single-query attention for incremental decoding (see kernels/attention.h, attention_decode):
// one new query per (row, head) over L cached keys. No Q K^T tile, no BLAS call: for each
// (row, head) a pass of L dot products of length Dh, a vexp softmax over L scores and an
// L-term weighted sum of value rows, all in registers / L1. Rows reach their keys through a
// physical-row map (per row, or per row and position), so beam search never moves cached keys.

#include <algorithm>
#include <limits>
#include <vector>

#include "qkv/kernels/attention.h"
#include "qkv/kernels/parallel.h"
#include "qkv/kernels/softmax.h"

#if defined(__AVX512F__)
#include <immintrin.h>
// GCC 12 reports its own _mm512_undefined_* inside the reduction intrinsics as "may be used
// uninitialized" wherever they are inlined (a known false positive); this file only.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace qkv::kernels {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

#if defined(__AVX512F__)
// a . b over n floats, n a multiple of 16: two accumulators, one shuffle-tree reduction (an
// `omp simd` reduction spills the lanes to the stack and adds them one by one).
inline float dot_avx512(const float* a, const float* b, int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t d = 0;
  for (; d + 32 <= n; d += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + d), _mm512_loadu_ps(b + d), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + d + 16), _mm512_loadu_ps(b + d + 16), acc1);
  }
  if (d < n) acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + d), _mm512_loadu_ps(b + d), acc0);
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

// Requests the n floats at p (one cached position of all heads) into L1.
inline void prefetch_row(const float* p, int64_t n) {
  for (int64_t c = 0; c < n; c += 16) _mm_prefetch(reinterpret_cast<const char*>(p + c), _MM_HINT_T0);
}

// o[c0 .. c0 + 16 NV) = sum_j p[h, j] v_j[c0 ..], the NV output vectors held in registers
// across all positions (a load-FMA-store per position would serialise on the store).
template <int NV, typename At>
inline void weighted_sum_block(int64_t c0, int64_t L, int64_t Dh, const float* p, int64_t p_ld, const uint8_t* pad,
                               At at, float* o) {
  __m512 acc[NV];
  const float* pv[NV];  // the probability row of the head each output vector belongs to
  for (int v = 0; v < NV; ++v) {
    acc[v] = _mm512_setzero_ps();
    pv[v] = p + ((c0 + 16 * v) / Dh) * p_ld;
  }
  for (int64_t j = 0; j < L; ++j) {
    if (pad && pad[j]) continue;
    const float* vr = at(j) + c0;
    for (int v = 0; v < NV; ++v) {
      const __m512 w = _mm512_set1_ps(pv[v][j]);
      acc[v] = _mm512_fmadd_ps(w, _mm512_loadu_ps(vr + 16 * v), acc[v]);
    }
  }
  for (int v = 0; v < NV; ++v) _mm512_storeu_ps(o + c0 + 16 * v, acc[v]);
}
#endif

}  // namespace

void attention_decode(const DecodeAttention& a) {
  const int64_t R = a.rows, H = a.heads, Dh = a.head_dim, L = a.length, D = H * Dh;
  if (R == 0 || H == 0) return;
  const float scale = a.scale;
#if defined(__AVX512F__)
  const bool vec = Dh % 16 == 0;
#else
  const bool vec = false;
#endif
  // Multiply-adds per call; small calls stay on one thread (waking the pool costs more).
  const bool parallel = R * L * D * 2 >= (int64_t(1) << 17);
  parallel_for_if(parallel, R, [&](int64_t r) {
    // Scores of one row, (H, L). A row's heads are handled together, so each cached position
    // is read as one contiguous run of H * Dh floats.
    // Per-thread buffers kept across calls (one call per layer and step: no malloc each time).
    thread_local std::vector<float> s, inv;
    s.resize(static_cast<size_t>(std::max<int64_t>(H * L, 1)));
    inv.resize(static_cast<size_t>(H));
    const float* q = a.q + r * a.q_row_stride;
    float* o = a.out + r * a.out_row_stride;
    const int32_t* table = a.table ? a.table + r * a.table_ld : nullptr;
    const int64_t fixed = a.row_map ? a.row_map[r] : r;
    const uint8_t* pad = a.key_padding ? a.key_padding + r * a.key_padding_ld : nullptr;
    auto at = [&](const float* base, int64_t j) {
      return base + (table ? int64_t(table[j]) : fixed) * a.row_stride + j * a.pos_stride;
    };
    // s[h, j] = scale * q_h . k_{j,h}  (masked: -inf)
    for (int64_t j = 0; j < L; ++j) {
      if (pad && pad[j]) {
        for (int64_t h = 0; h < H; ++h) s[size_t(h * L + j)] = kNegInf;
        continue;
      }
      const float* k = at(a.k, j);
#if defined(__AVX512F__)
      if (vec) prefetch_row(at(a.v, j), D);  // this position's values, for the weighted sum below
#endif
      for (int64_t h = 0; h < H; ++h) {
        const float* qh = q + h * Dh;
        const float* kh = k + h * Dh;
        float dot = 0.f;
#if defined(__AVX512F__)
        if (vec) {
          s[size_t(h * L + j)] = dot_avx512(qh, kh, Dh) * scale;
          continue;
        }
#endif
#pragma omp simd reduction(+ : dot)
        for (int64_t d = 0; d < Dh; ++d) dot += qh[d] * kh[d];
        s[size_t(h * L + j)] = dot * scale;
      }
    }
    // Softmax over j per head; a fully masked head gets weights 0 (out = 0).
    for (int64_t h = 0; h < H; ++h) {
      float* sh = s.data() + h * L;
      float mx = kNegInf;
      for (int64_t j = 0; j < L; ++j) mx = std::max(mx, sh[j]);
      if (mx == kNegInf) {
        std::fill(sh, sh + L, 0.f);
        inv[size_t(h)] = 0.f;
        continue;
      }
      float sum = 0.f;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < L; ++j) {
        const float e = vexp(sh[j] - mx);
        sh[j] = e;
        sum += e;
      }
      inv[size_t(h)] = 1.f / sum;
    }
    // o_h = sum_j p_{h,j} v_{j,h}
#if defined(__AVX512F__)
    if (vec) {
      for (int64_t h = 0; h < H; ++h)  // normalise once: p = e / sum
        for (int64_t j = 0; j < L; ++j) s[size_t(h * L + j)] *= inv[size_t(h)];
      // While the values are summed, the next row's keys are requested (the cache lives in
      // L3: a decoder step reads ~10 MB of K/V at batch 32). The last row has none: requesting its
      // own keys again would read them twice (at batch 1 with a long cache, from memory: GPT-2's
      // attention over 1,000 cached positions took 12% longer).
      const int64_t rn = r + 1;
      const int32_t* table_n = a.table && rn < R ? a.table + rn * a.table_ld : nullptr;
      const int64_t fixed_n = a.row_map && rn < R ? a.row_map[rn] : rn;
      bool first_block = rn < R;  // later blocks visit the same positions: request the keys once
      auto v_at = [&](int64_t j) {
        if (first_block)
          prefetch_row(a.k + (table_n ? int64_t(table_n[j]) : fixed_n) * a.row_stride + j * a.pos_stride, D);
        return at(a.v, j);
      };
      int64_t c0 = 0;
      for (; c0 + 256 <= D; c0 += 256, first_block = false)
        weighted_sum_block<16>(c0, L, Dh, s.data(), L, pad, v_at, o);
      for (; c0 < D; c0 += 16, first_block = false) weighted_sum_block<1>(c0, L, Dh, s.data(), L, pad, v_at, o);
      return;
    }
#endif
    std::fill(o, o + D, 0.f);
    for (int64_t j = 0; j < L; ++j) {
      if (pad && pad[j]) continue;
      const float* v = at(a.v, j);
      for (int64_t h = 0; h < H; ++h) {
        const float p = s[size_t(h * L + j)] * inv[size_t(h)];
        float* oh = o + h * Dh;
        const float* vh = v + h * Dh;
#pragma omp simd
        for (int64_t d = 0; d < Dh; ++d) oh[d] += p * vh[d];
      }
    }
  });
}

}  // namespace qkv::kernels
