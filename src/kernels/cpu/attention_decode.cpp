// Single-query attention for incremental decoding (see kernels/attention.h, attention_decode):
// one new query per (row, head) over L cached keys. No Q K^T tile, no BLAS call: for each
// (row, head) a pass of L dot products of length Dh, a vexp softmax over L scores and an
// L-term weighted sum of value rows (in chunks of 128 positions, added in order), all in
// registers / L1. Rows reach their keys through a physical-row map (per row, or per row and
// position), so beam search never moves cached keys. A batch of one row over a long cache
// splits its positions over the threads with the same arithmetic.

#include <omp.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "qkv/kernels/attention.h"
#include "qkv/kernels/parallel.h"
#include "qkv/kernels/softmax.h"
#include "row_max.h"
#include "unroll.h"

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

// out[c0 .. c0 + 16 NV) = sum_{j0 <= j < j1} p[h, j] v_j[c0 ..], the NV output vectors held in
// registers across the positions (a load-FMA-store per position would serialise on the store).
template <int NV, typename At>
inline void weighted_sum_block(int64_t c0, int64_t j0, int64_t j1, int64_t Dh, const float* p, int64_t p_ld,
                               const uint8_t* pad, At at, float* out) {
  __m512 acc[NV];
  const float* pv[NV];  // the probability row of the head each output vector belongs to
  QKV_UNROLL
  for (int v = 0; v < NV; ++v) {
    acc[v] = _mm512_setzero_ps();
    pv[v] = p + ((c0 + 16 * v) / Dh) * p_ld;
  }
  for (int64_t j = j0; j < j1; ++j) {
    if (pad && pad[j]) continue;
    const float* vr = at(j) + c0;
    QKV_UNROLL
    for (int v = 0; v < NV; ++v) {
      const __m512 w = _mm512_set1_ps(pv[v][j]);
      acc[v] = _mm512_fmadd_ps(w, _mm512_loadu_ps(vr + 16 * v), acc[v]);
    }
  }
  QKV_UNROLL
  for (int v = 0; v < NV; ++v) _mm512_storeu_ps(out + c0 + 16 * v, acc[v]);
}
#endif

// Cached positions are summed in chunks of kChunk: a chunk's weighted sum of values is one
// partial vector, and a row's output is its partials added in chunk order. A batch-1 row over a
// long cache hands its chunks to different threads; the bits depend on the length alone, not on
// the threads or the other rows (a cache of at most kChunk positions is one plain sum).
constexpr int64_t kChunk = 128;

// One row of the batch: its query, output, padding and where its cached positions live.
struct RowView {
  const float* q;
  float* o;
  const int32_t* table;  // per-position storage rows, or null
  int64_t fixed;         // the storage row when there is no table
  const uint8_t* pad;    // (length) nonzero = masked, or null

  RowView(const DecodeAttention& a, int64_t r)
      : q(a.q + r * a.q_row_stride),
        o(a.out + r * a.out_row_stride),
        table(a.table ? a.table + r * a.table_ld : nullptr),
        fixed(a.row_map ? a.row_map[r] : r),
        pad(a.key_padding ? a.key_padding + r * a.key_padding_ld : nullptr) {}
  const float* at(const DecodeAttention& a, const float* base, int64_t j) const {
    return base + (table ? int64_t(table[j]) : fixed) * a.row_stride + j * a.pos_stride;
  }
};

// s[h * L + j] = scale * q_h . k_{j,h} for j in [j0, j1) (masked: -inf). A row's heads are handled
// together, so each cached position is read as one contiguous run of H * Dh floats.
void scores(const DecodeAttention& a, const RowView& row, int64_t j0, int64_t j1, bool vec, float* s) {
  const int64_t H = a.heads, Dh = a.head_dim, L = a.length;
  for (int64_t j = j0; j < j1; ++j) {
    if (row.pad && row.pad[j]) {
      for (int64_t h = 0; h < H; ++h) s[h * L + j] = kNegInf;
      continue;
    }
    const float* k = row.at(a, a.k, j);
#if defined(__AVX512F__)
    if (vec) prefetch_row(row.at(a, a.v, j), H * Dh);  // this position's values, for the weighted sum
#endif
    for (int64_t h = 0; h < H; ++h) {
      const float* qh = row.q + h * Dh;
      const float* kh = k + h * Dh;
#if defined(__AVX512F__)
      if (vec) {
        s[h * L + j] = dot_avx512(qh, kh, Dh) * a.scale;
        continue;
      }
#endif
      float dot = 0.f;
#pragma omp simd reduction(+ : dot)
      for (int64_t d = 0; d < Dh; ++d) dot += qh[d] * kh[d];
      s[h * L + j] = dot * a.scale;
    }
  }
}

// Softmax over j of heads [h0, h1) of s (H, L), in place: p = e / sum. A fully masked head gets
// weights 0 (its output is 0).
void softmax_heads(float* s, int64_t L, int64_t h0, int64_t h1) {
  for (int64_t h = h0; h < h1; ++h) {
    float* sh = s + h * L;
    const float mx = row_max(sh, L);  // NaN for a head of NaN scores, which then spreads (row_max.h)
    if (mx == kNegInf) {
      std::fill(sh, sh + L, 0.f);
      continue;
    }
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < L; ++j) {
      const float e = vexp(sh[j] - mx);
      sh[j] = e;
      sum += e;
    }
    const float inv = 1.f / sum;
    for (int64_t j = 0; j < L; ++j) sh[j] *= inv;
  }
}

// out[0 .. H * Dh) = sum_{j0 <= j < j1} p_{h,j} v_{j,h}. While the values are summed, `next` (the
// row after this one, or null) has its keys requested: the cache lives in L3 (a decoder step
// reads ~10 MB of K/V at batch 32). The last row requests none: its own keys again would be read
// twice (at batch 1 with a long cache, from memory: GPT-2's attention over 1,000 cached positions
// took 12% longer).
void weighted_sum(const DecodeAttention& a, const RowView& row, const RowView* next, int64_t j0, int64_t j1,
                  bool vec, const float* s, float* out) {
  const int64_t H = a.heads, Dh = a.head_dim, L = a.length, D = H * Dh;
#if defined(__AVX512F__)
  if (vec) {
    bool first_block = next != nullptr;  // later blocks visit the same positions: request the keys once
    auto v_at = [&](int64_t j) {
      if (first_block) prefetch_row(next->at(a, a.k, j), D);
      return row.at(a, a.v, j);
    };
    int64_t c0 = 0;
    for (; c0 + 256 <= D; c0 += 256, first_block = false)
      weighted_sum_block<16>(c0, j0, j1, Dh, s, L, row.pad, v_at, out);
    for (; c0 < D; c0 += 16, first_block = false) weighted_sum_block<1>(c0, j0, j1, Dh, s, L, row.pad, v_at, out);
    return;
  }
#endif
  (void)next;
  (void)vec;
  std::fill(out, out + D, 0.f);
  for (int64_t j = j0; j < j1; ++j) {
    if (row.pad && row.pad[j]) continue;
    const float* v = row.at(a, a.v, j);
    for (int64_t h = 0; h < H; ++h) {
      const float p = s[h * L + j];
      float* oh = out + h * Dh;
      const float* vh = v + h * Dh;
#pragma omp simd
      for (int64_t d = 0; d < Dh; ++d) oh[d] += p * vh[d];
    }
  }
}

// o[d0 .. d1) += the partials of chunks 1 .. n-1 (part: (n - 1, D)), in chunk order.
void add_partials(float* o, const float* part, int64_t n, int64_t D, int64_t d0, int64_t d1) {
  for (int64_t c = 1; c < n; ++c) {
    const float* pc = part + (c - 1) * D;
#pragma omp simd
    for (int64_t d = d0; d < d1; ++d) o[d] += pc[d];
  }
}

int64_t chunk_end(int64_t c, int64_t L) { return std::min((c + 1) * kChunk, L); }

// A batch-1 row over a long cache on all threads: each takes a run of chunks for the scores and
// the weighted sums, and a share of the heads for the softmax and of the columns for adding the
// partials. The same arithmetic as one thread (see kChunk), three barriers.
void one_row_on_all_threads(const DecodeAttention& a, bool vec, int64_t chunks) {
  const int64_t H = a.heads, L = a.length, D = H * a.head_dim;
  thread_local std::vector<float> s_buf, part_buf;  // this (the calling) thread's, shared with the team
  s_buf.resize(static_cast<size_t>(H * L));
  part_buf.resize(static_cast<size_t>((chunks - 1) * D));
  float* s = s_buf.data();
  float* part = part_buf.data();
  const RowView row(a, 0);
#pragma omp parallel
  {
    const int64_t T = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t c0 = chunks * t / T, c1 = chunks * (t + 1) / T;
    scores(a, row, c0 * kChunk, std::min(c1 * kChunk, L), vec, s);
#pragma omp barrier
    softmax_heads(s, L, H * t / T, H * (t + 1) / T);
#pragma omp barrier
    for (int64_t c = c0; c < c1; ++c)
      weighted_sum(a, row, nullptr, c * kChunk, chunk_end(c, L), vec, s, c == 0 ? row.o : part + (c - 1) * D);
#pragma omp barrier
    const int64_t n16 = (D + 15) / 16;  // columns in whole vectors
    add_partials(row.o, part, chunks, D, std::min(D, 16 * (n16 * t / T)), std::min(D, 16 * (n16 * (t + 1) / T)));
  }
}

}  // namespace

void attention_decode(const DecodeAttention& a) {
  const int64_t R = a.rows, H = a.heads, Dh = a.head_dim, L = a.length, D = H * Dh;
  if (R == 0 || H == 0) return;
#if defined(__AVX512F__)
  const bool vec = Dh % 16 == 0;
#else
  const bool vec = false;
#endif
  const int64_t chunks = std::max<int64_t>(1, (L + kChunk - 1) / kChunk);
  // Multiply-adds per call; small calls stay on one thread (waking the pool costs more).
  const bool parallel = R * L * D * 2 >= (int64_t(1) << 17);
  if (R == 1 && chunks > 1 && parallel && omp_get_max_threads() > 1) {
    one_row_on_all_threads(a, vec, chunks);
    return;
  }
  parallel_for_if(parallel, R, [&](int64_t r) {
    // Per-thread buffers kept across calls (one call per layer and step: no malloc each time).
    thread_local std::vector<float> s, part;
    s.resize(static_cast<size_t>(std::max<int64_t>(H * L, 1)));
    part.resize(static_cast<size_t>((chunks - 1) * D));
    const RowView row(a, r), after(a, std::min(r + 1, R - 1));  // `after` is used only when r + 1 < R
    scores(a, row, 0, L, vec, s.data());
    softmax_heads(s.data(), L, 0, H);
    for (int64_t c = 0; c < chunks; ++c)
      weighted_sum(a, row, r + 1 < R ? &after : nullptr, c * kChunk, chunk_end(c, L), vec, s.data(),
                   c == 0 ? row.o : part.data() + (c - 1) * D);
    add_partials(row.o, part.data(), chunks, D, 0, D);
  });
}

}  // namespace qkv::kernels
