// The rows layout's product (gemm_rows.h): each output a dot product of an x row with a weight
// row, weight rows streamed contiguously. At batch 1 a decoding step is memory-bound (GPT-2 124M
// reads 500 MB of f32 weights per token, 250 MB in bf16), so what matters is that every weight
// byte is read once, in long contiguous streams, by both threads at once: threads own disjoint
// ranges of 8-row blocks (a block is 8 * K contiguous elements) and every x row is multiplied with
// a block while it is in L1. At batch 1 (and at 3-4 f32 rows) a thread reads its range as two
// streams (AMD family 19h), four (other AMD) or eight (other CPUs), a row of each part at a time,
// and the last 1/8 of the blocks go to whichever thread is free (see rows_product_of).
//
// bf16 (uint16_t bits: x rounded by the caller, the weights converted once) runs on AVX512_BF16's
// vdpbf16ps, 32 values of K per instruction as 16 pairs: lane l adds the exact products of the
// pair (2l, 2l + 1) of every 32-value chunk to its f32 sum (bf16 subnormals read as zero), with no
// conversion in the loop. Without AVX512_BF16 in the build the values are widened to f32 in
// registers and multiplied with FMAs. An AVX2 build (no AVX-512) computes the same sums bit for bit
// with 8-lane halves; a build with neither, with scalar loops in the same order.
#include "gemm_rows.h"

#include "avx2_lanes.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "qkv/kernels/bf16.h"
#include "qkv/kernels/gemm.h"
#include "qkv/kernels/parallel.h"
#include "qkv/util/error.h"
#include "unroll.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#define QKV_ROWS_SIMD 1
#endif

namespace qkv::kernels {
namespace {

constexpr int64_t kBlock = 8;  // weight rows per block (outputs per tile, at most)
#if defined(__AVX512F__) || !defined(QKV_ROWS_SIMD)
constexpr int kTileAccs = 16;  // accumulators a tile keeps: 16 of AVX-512's 32 registers
#else
// AVX2: each accumulator is two of the 16 ymm registers. 8 against 16 and 4, bench_gpt_batch, Zen 3:
// ms per step at 2 / 3 / 4 prompts 24.3 / 23.6 / 26.2, against 27.5 / 23.2 / 28.7 and 25.4 / 27.1 / 27.6.
constexpr int kTileAccs = 8;
#endif
constexpr int64_t kTailChunk = 4;  // blocks a thread claims at a time in batch 1's shared tail

#if defined(__AVX512F__)
// The sum of v's 16 lanes by a fixed tree: lane l + lane l+8, then + 4, + 2, + 1 (what GCC's
// _mm512_reduce_add_ps does, written with in-register shuffles; the masked forms with every lane
// selected, because GCC 12 warns about the unmasked ones' undefined pass-through operand).
inline float lane_sum(__m512 v) {
  constexpr __mmask16 all = 0xFFFF;
  v = _mm512_add_ps(v, _mm512_mask_shuffle_f32x4(v, all, v, v, 0x4E));  // 256-bit halves swapped
  v = _mm512_add_ps(v, _mm512_mask_shuffle_f32x4(v, all, v, v, 0xB1));  // 128-bit quarters swapped in pairs
  v = _mm512_add_ps(v, _mm512_mask_permute_ps(v, all, v, 0x4E));        // 64-bit pairs swapped
  v = _mm512_add_ps(v, _mm512_mask_permute_ps(v, all, v, 0xB1));        // neighbours swapped
  return _mm512_cvtss_f32(v);
}

// The products of one step of K into an accumulator: f32, 16 values by FMA; bf16, 32 values (16
// pairs) by vdpbf16ps. load_tail reads the first n < kStep values and zeros after (never past p + n).
template <typename T>
constexpr int64_t kStep = std::is_same_v<T, float> ? 16 : 32;
inline __m512 load(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load_tail(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(__mmask16((1u << n) - 1), p); }
inline __m512 madd(__m512 acc, __m512 x, __m512 w) { return _mm512_fmadd_ps(x, w, acc); }
using Acc = __m512;
inline Acc zero() { return _mm512_setzero_ps(); }
#if defined(__AVX512BF16__)
inline __m512i load(const uint16_t* p) { return _mm512_loadu_si512(p); }
inline __m512i load_tail(const uint16_t* p, int64_t n) {
  return _mm512_maskz_loadu_epi16(__mmask32((uint64_t(1) << n) - 1), p);
}
inline __m512 madd(__m512 acc, __m512i x, __m512i w) { return _mm512_dpbf16_ps(acc, (__m512bh)x, (__m512bh)w); }
#else
// 32 bf16 values as two f32 vectors (bits << 16 is the value, exactly); the zero-masking forms with
// every lane selected, for GCC 12's warning as in lane_sum.
struct Bf16x32 {
  __m512 lo, hi;
};
inline __m512 widen(__m256i bits) {
  constexpr __mmask16 all = 0xFFFF;
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all, _mm512_maskz_cvtepu16_epi32(all, bits), 16));
}
inline Bf16x32 load(const uint16_t* p) {
  return {widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))),
          widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16)))};
}
inline Bf16x32 load_tail(const uint16_t* p, int64_t n) {
  uint16_t buf[32] = {};
  std::memcpy(buf, p, size_t(n) * sizeof(uint16_t));
  return load(buf);
}
inline __m512 madd(__m512 acc, const Bf16x32& x, const Bf16x32& w) {
  return _mm512_fmadd_ps(x.hi, w.hi, _mm512_fmadd_ps(x.lo, w.lo, acc));
}
#endif
#elif defined(QKV_ROWS_SIMD)
// AVX2 (AMD Zen 3, older Xeons): AVX-512's 16 lanes as two 8-lane halves, lo (lanes 0-7) and hi
// (8-15), so that every sum is the AVX-512 build's bit for bit: lane l sums the products at
// k = l, l + 16, ... with FMAs in k order, then lane_sum's tree (l + l+8, then + 4, + 2, + 1).
struct Acc {
  __m256 lo, hi;
};
inline Acc zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
inline float lane_sum(Acc a) {
  __m256 v = _mm256_add_ps(a.lo, a.hi);                    // lane l + lane l+8
  v = _mm256_add_ps(v, _mm256_permute2f128_ps(v, v, 1));  // + 4: 128-bit halves swapped
  v = _mm256_add_ps(v, _mm256_permute_ps(v, 0x4E));       // + 2: 64-bit pairs swapped
  v = _mm256_add_ps(v, _mm256_permute_ps(v, 0xB1));       // + 1: neighbours swapped
  return _mm256_cvtss_f32(v);
}
template <typename T>
constexpr int64_t kStep = std::is_same_v<T, float> ? 16 : 32;
inline Acc load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
inline Acc load_tail(const float* p, int64_t n) {
  return {_mm256_maskload_ps(p, first_lanes(n)), _mm256_maskload_ps(p + 8, first_lanes(n - 8))};
}
inline Acc madd(Acc acc, Acc x, Acc w) {
  return {_mm256_fmadd_ps(x.lo, w.lo, acc.lo), _mm256_fmadd_ps(x.hi, w.hi, acc.hi)};
}
// 32 bf16 values widened to f32 (bits << 16, exactly): values 0-15 as an Acc, then 16-31.
struct Bf16x32 {
  Acc first, second;
};
inline __m256 widen(const uint16_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
inline Bf16x32 load(const uint16_t* p) { return {{widen(p), widen(p + 8)}, {widen(p + 16), widen(p + 24)}}; }
inline Bf16x32 load_tail(const uint16_t* p, int64_t n) {
  uint16_t buf[32] = {};
  std::memcpy(buf, p, size_t(n) * sizeof(uint16_t));
  return load(buf);
}
inline Acc madd(Acc acc, const Bf16x32& x, const Bf16x32& w) {
  return madd(madd(acc, x.first, w.first), x.second, w.second);
}
#endif

#if defined(QKV_ROWS_SIMD)

// sum[m][r] = dot(x[m * ldx ..], w[r][..]) for MR rows of x and NR weight rows (pointers w: rows
// of one block, or far apart). Lane l of an accumulator sums the products at k = l, l + 16, ... in
// k order (the tail zero-padded); the 16 lanes are then added by lane_sum (a fixed tree). So a sum
// depends only on its x row, its weight row and K. Stream (bf16's first pass over a block at batch
// > 1, rows_block): each 64-byte line is requested kStreamAheadBytes before it is used. For f32's
// 8-row blocks the next block is not prefetched in software: into L1 (T0) it made the rows
// 1.17-1.20x slower than the panels (Intel Xeon); into L2 (T1) it was level with none there and
// 8-10% slower than none on AMD EPYC Zen 5 (bench_matmul gpt2stream, BENCHMARKS.md). The callers
// keep MR * NR <= kTileAccs accumulators, so that they stay in registers.
constexpr int64_t kStreamAheadBytes = 8192;  // the best of 4, 8 and 16 KB (f32 at batch 1, 2 streams, Zen 5)
// A hint for the line kStreamAheadBytes past p (the address may lie past the weight's end: never a fault).
inline void prefetch_ahead(const void* p) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) + kStreamAheadBytes), _MM_HINT_T0);
}
#if !defined(__AVX512F__)
// AVX2, f32, 2 x rows: one step of 16 values of K as its two 8-lane halves in turn, each x half
// read from L1 where it is used. Only the 16 accumulator registers of a 2 x 4 tile and one weight
// half stay live, not also 4 x registers and 2 weight ones (22 ymm values in 16 registers, spilled
// in the loop). Each accumulator half sums the same products in the same order: the same bits.
// GPT-2 124M at 2 prompts, bench_gpt_batch 3, alternating twice (AMD EPYC Zen 1): 31.8 / 31.6 ms
// a step -> 28.4 / 28.8. At 4 rows (a 4 x 2 tile from rows_far_apart) the same form was 5-6%
// slower than the whole steps (37.0 -> 39.0 ms; beam 4: 35.1 -> 37.2), at 1 and 3 rows level.
template <int MR, int NR>
inline void step_in_halves(const float* x, int64_t ldx, const float* const* w, int64_t k, Acc (&acc)[MR][NR]) {
  QKV_UNROLL
  for (int h = 0; h < 2; ++h) {
    __m256 Acc::*const half = h == 0 ? &Acc::lo : &Acc::hi;
    QKV_UNROLL
    for (int r = 0; r < NR; ++r) {
      const __m256 wv = _mm256_loadu_ps(w[r] + k + 8 * h);
      QKV_UNROLL
      for (int m = 0; m < MR; ++m)
        acc[m][r].*half = _mm256_fmadd_ps(_mm256_loadu_ps(x + m * ldx + k + 8 * h), wv, acc[m][r].*half);
    }
  }
}
#endif

template <int MR, int NR, bool Stream, typename T>
inline void dot_tile(const T* x, int64_t ldx, const T* const* w, int64_t K, float (&sum)[MR][NR]) {
  static_assert(MR * NR <= 16, "accumulators must stay in registers");
  constexpr int64_t S = kStep<T>;
  Acc acc[MR][NR];
  QKV_UNROLL
  for (int m = 0; m < MR; ++m)
    QKV_UNROLL
    for (int r = 0; r < NR; ++r) acc[m][r] = zero();
  int64_t k = 0;
  for (; k + S <= K; k += S) {
#if !defined(__AVX512F__)
    if constexpr (std::is_same_v<T, float> && MR == 2 && !Stream) {  // f32 is never streamed (rows_block)
      step_in_halves(x, ldx, w, k, acc);
      continue;
    }
#endif
    decltype(load(x)) xv[MR];
    QKV_UNROLL
    for (int m = 0; m < MR; ++m) xv[m] = load(x + m * ldx + k);
    if constexpr (Stream)
      QKV_UNROLL
      for (int r = 0; r < NR; ++r) prefetch_ahead(w[r] + k);
    QKV_UNROLL
    for (int r = 0; r < NR; ++r) {
      const auto wv = load(w[r] + k);
      QKV_UNROLL
      for (int m = 0; m < MR; ++m) acc[m][r] = madd(acc[m][r], xv[m], wv);
    }
  }
  if (k < K) {  // the last K % S columns, zeros past K
    decltype(load(x)) xv[MR];
    QKV_UNROLL
    for (int m = 0; m < MR; ++m) xv[m] = load_tail(x + m * ldx + k, K - k);
    QKV_UNROLL
    for (int r = 0; r < NR; ++r) {
      const auto wv = load_tail(w[r] + k, K - k);
      QKV_UNROLL
      for (int m = 0; m < MR; ++m) acc[m][r] = madd(acc[m][r], xv[m], wv);
    }
  }
  QKV_UNROLL
  for (int m = 0; m < MR; ++m)
    QKV_UNROLL
    for (int r = 0; r < NR; ++r) sum[m][r] = lane_sum(acc[m][r]);
}
#else
inline float as_f32(float v) { return v; }
inline float as_f32(uint16_t v) { return from_bf16(v); }
// The same sums as the AVX-512 version: f32, the same order of additions (16 k-ordered lane sums
// of fused multiply-adds, then lane_sum's tree: lane l + lane l+8, then + 4, + 2, + 1); bf16, the
// same exact products in that order too (not vdpbf16ps's pairs).
template <int MR, int NR, bool Stream, typename T>
inline void dot_tile(const T* x, int64_t ldx, const T* const* w, int64_t K, float (&sum)[MR][NR]) {
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) {
      float lane[16] = {};
      for (int64_t k = 0; k < K; ++k)
        lane[k % 16] = std::fma(as_f32(x[m * ldx + k]), as_f32(w[r][k]), lane[k % 16]);
      for (int half = 8; half >= 1; half /= 2)
        for (int l = 0; l < half; ++l) lane[l] += lane[l + half];
      sum[m][r] = lane[0];
    }
}
#endif

// out[m * ldo + r] = bias[r] + dot(x[m * ldx ..], w[r][..]) (dot_tile; bias may be null).
template <int MR, int NR, bool Stream = false, typename T>
void rows_tile(const T* x, int64_t ldx, const T* const* w, int64_t K, const float* bias, float* out, int64_t ldo) {
  float sum[MR][NR];
  dot_tile<MR, NR, Stream>(x, ldx, w, K, sum);
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) out[m * ldo + r] = sum[m][r] + (bias ? bias[r] : 0.f);
}

// Streams weight rows far apart (one from each of the Streams parts of a thread's range)
// against MR rows of x, each weight row read as its own stream: out[s][m * ldo] gets exactly what
// rows_tile computes for x row m and weight row s (bias[s] may be null). No software prefetch:
// with eight streams a line requested 1 KB ahead measured level with none (Intel Xeon; see
// rows_product_of).
template <int MR, int Streams, typename T>
void rows_far_apart(const T* x, int64_t ldx, const T* const* w, int64_t K, const float* const* bias,
                    float* const* out, int64_t ldo) {
  float sum[MR][Streams];
  dot_tile<MR, Streams, false>(x, ldx, w, K, sum);
  for (int m = 0; m < MR; ++m)
    for (int s = 0; s < Streams; ++s) out[s][m * ldo] = sum[m][s] + (bias[s] ? *bias[s] : 0.f);
}

// MR rows of x against a whole block (kBlock weight rows) as tiles of NR weight rows, NR the widest
// of 8, 4, 2, 1 whose MR * NR accumulators stay in registers (kTileAccs). AVX-512: up to 2 x rows
// take the block 8 rows wide, 3-4 x rows as two halves of 4.
template <int MR, bool Stream, typename T>
void block_tiles(const T* xm, int64_t ldx, const T* const* w, int64_t K, const float* bias, float* om, int64_t ldo) {
  constexpr int NR = MR * 8 <= kTileAccs ? 8 : MR * 4 <= kTileAccs ? 4 : MR * 2 <= kTileAccs ? 2 : 1;
  for (int r = 0; r < kBlock; r += NR)
    rows_tile<MR, NR, Stream>(xm, ldx, w + r, K, bias ? bias + r : nullptr, om + r, ldo);
}

// Up to 4 rows of x (mr) against a block of nrows <= kBlock weight rows (pointers w): a whole block
// by block_tiles, a partial block one weight row at a time. Stream: each weight row prefetched
// ahead as it is read (rows_tile).
template <bool Stream, typename T>
void rows_pass(int64_t mr, const T* xm, int64_t ldx, const T* const* w, int64_t nrows, int64_t K, const float* bias,
               float* om, int64_t ldo) {
  if (nrows == kBlock) {
    switch (mr) {
      case 1: return block_tiles<1, Stream>(xm, ldx, w, K, bias, om, ldo);
      case 2: return block_tiles<2, Stream>(xm, ldx, w, K, bias, om, ldo);
      case 3: return block_tiles<3, Stream>(xm, ldx, w, K, bias, om, ldo);
      default: return block_tiles<4, Stream>(xm, ldx, w, K, bias, om, ldo);
    }
  }
  for (int64_t r = 0; r < nrows; ++r) {
    const T* const* wr = w + r;
    const float* br = bias ? bias + r : nullptr;
    switch (mr) {
      case 1: rows_tile<1, 1, Stream>(xm, ldx, wr, K, br, om + r, ldo); break;
      case 2: rows_tile<2, 1, Stream>(xm, ldx, wr, K, br, om + r, ldo); break;
      case 3: rows_tile<3, 1, Stream>(xm, ldx, wr, K, br, om + r, ldo); break;
      default: rows_tile<4, 1, Stream>(xm, ldx, wr, K, br, om + r, ldo);
    }
  }
}

// One block of weight rows against all M rows of x, 4 x rows per pass: the block is read from
// memory by the first pass and from L1 by the later ones. bf16's first pass prefetches the rows
// ahead (into the blocks that follow): without it GPT-2's products at 8 rows read their weights at
// 8 GB/s, the hardware prefetcher not catching 8 interleaved streams of 1.5 KB rows; f32 does
// not (measured level with none on the Xeon, slower on AMD EPYC Zen 5: see rows_tile).
template <typename T>
void rows_block(int64_t M, const T* x, int64_t ldx, const T* const* w, int64_t nrows, int64_t K, const float* bias,
                float* out, int64_t ldo) {
  for (int64_t m0 = 0; m0 < M; m0 += 4) {
    const int64_t mr = std::min<int64_t>(4, M - m0);
    if (std::is_same_v<T, uint16_t> && m0 == 0)
      rows_pass<true>(mr, x + m0 * ldx, ldx, w, nrows, K, bias, out + m0 * ldo, ldo);
    else
      rows_pass<false>(mr, x + m0 * ldx, ldx, w, nrows, K, bias, out + m0 * ldo, ldo);
  }
}

// Rows [lo, hi) of src against the MR (1, 3 or 4) rows of x as Streams streams, a row of each of
// the range's Streams equal parts at a time, each against every x row while it is in L1
// (rows_far_apart, in passes of at most 16 accumulators), then the rows left over (fewer than
// Streams) one by one. out[m * ldo + n] and bias[n] (bias may be null) are indexed by global row n.
template <int Streams, int MR, typename T>
void rows_in_streams(const T* x, int64_t ldx, const RowSource<T>& src, int64_t lo, int64_t hi, const float* bias,
                     float* out, int64_t ldo) {
  constexpr int C = std::min(Streams, kTileAccs / (MR == 3 ? 4 : MR));  // streams per pass
  const int64_t per = (hi - lo) / Streams, K = src.K;
  const T* w[Streams];
  const float* b[Streams];
  float* o[Streams];
  for (int64_t j = 0; j < per; ++j) {
    for (int s = 0; s < Streams; ++s) {
      const int64_t n = lo + s * per + j;
      w[s] = src.row(n);
      b[s] = bias ? bias + n : nullptr;
      o[s] = out + n;
    }
    for (int s = 0; s < Streams; s += C) rows_far_apart<MR, C>(x, ldx, w + s, K, b + s, o + s, ldo);
  }
  for (int64_t n = lo + Streams * per; n < hi; ++n) {
    const T* wn = src.row(n);
    rows_tile<MR, 1>(x, ldx, &wn, K, bias ? bias + n : nullptr, out + n, ldo);
  }
}

// rows_in_streams with the stream count chosen at run time.
template <int MR, typename T>
void rows_in_streams(int streams, const T* x, int64_t ldx, const RowSource<T>& src, int64_t lo, int64_t hi,
                     const float* bias, float* out, int64_t ldo) {
  switch (streams) {
    case 1: return rows_in_streams<1, MR>(x, ldx, src, lo, hi, bias, out, ldo);
    case 2: return rows_in_streams<2, MR>(x, ldx, src, lo, hi, bias, out, ldo);
    case 4: return rows_in_streams<4, MR>(x, ldx, src, lo, hi, bias, out, ldo);
    default: return rows_in_streams<8, MR>(x, ldx, src, lo, hi, bias, out, ldo);
  }
}

// Blocks of 8 rows are split among threads in contiguous ranges (read as streams, all but a shared
// tail): each thread streams its own part of every weight, and each output is computed by one
// thread in a fixed order. At batch 1 rows are taken one at a time (the same order of additions
// as the 8-row tiles) rather than as 8-row tiles: GPT-2 124M's products streamed from DRAM at
// 73-87 GB/s against 38 for 8-row tiles in a standalone loop of the two (AMD EPYC Zen 5). A
// thread (on the pool, or alone when the product is too small for it) reads its range as
// several streams, its parts a row of each at a time (rows_in_streams): one core keeps more
// lines in flight with more streams, up to a point that depends on the CPU. GPT-2's 49 products
// of a token, in a loop on the Intel Xeon with AMX: 2 streams prefetched 8 KB ahead 20.1 GB/s, 4
// streams 22.0, 8 streams 25.6, 16 streams 26.0 (medians of ten alternations, 2026-11-29). On
// AMD EPYC Zen 5 two streams had read 67-68 GB/s against one's 60-61, and with the shared tail
// below 4 streams generate GPT-2 124M 5-6% faster than 8 in fp32 and 8-9% in bf16 (median ratio
// of 10 alternating pairs in one process, two sittings each, q1 above 1 in all; 2026-12-02). On
// AMD EPYC Zen 4 (family 19h) 4 streams read a 490 MB product 8-15% slower than 2 in fp32 and
// 3-25% in bf16, 1 and 2 level (median of 40 alternations, two sittings each), and GPT-2 124M
// generated 6-7% faster with 2 than with 4 in fp32 and 2-4% in bf16 (median pair ratios of 12
// pairs in one process, two sittings each; 2026-12-03). So AMD family 19h takes 2 (Zen 4; Zen 3
// not measured), other AMD 4, the rest 8 (rows_streams_per_thread; Intel generations other than
// the Xeon with AMX not measured).
//
// The two threads of a VM do not stream at the same pace (one was 5-23% slower, and not always
// the same one), and a static split leaves the faster one waiting at every product's end. So at
// batch 1 only the first 7/8 of the blocks are split statically (long streams); the last 1/8 is
// claimed kTailChunk blocks at a time by whichever thread is free. Which thread computes a row
// does not change its bits. GPT-2 124M fp32 generation, static and shared tail alternating in one
// process (10-12 pairs, four sittings): 2-5% faster per token (median pair ratio 1.02-1.05, q1
// above 1 in each); bf16 level (AMD EPYC Zen 5).
//
// Three or four f32 rows of x (a beam search's 4 beams, a small batch) are read the same way, each
// weight row multiplied with all of them while it is in L1. GPT-2 124M's 49 products took 0.83-0.96x
// the 8-row blocks' time at 3 rows and 0.81-1.01x at 4 (median ratios of 12-20 alternations in one
// process, four sittings), and decoding steps of 3-4 rows (greedy batches, beam search with 4
// beams) ran 1.14-1.36x faster (bench_gpt_batch, five alternating runs). At 2 rows the streams
// hold only 8 accumulators and took 1.04-1.23x the blocks' time; from 6 rows they were level or
// slower (AMD EPYC Zen 5, 2026-12-05). bf16 keeps the blocks, whose first pass prefetches: its
// streams at 3 and 4 rows were level with them (median ratios 0.97-1.00 in two sittings of 16
// alternations).
template <typename T>
void rows_product_of(int64_t M, const T* x, int64_t ldx, const RowSource<T>& src, int64_t N, const float* bias,
                     float* out, int64_t min_macs) {
  const int64_t K = src.K, nb = (N + kBlock - 1) / kBlock;
  if (M == 1 || (std::is_same_v<T, float> && (M == 3 || M == 4))) {
    const int streams = rows_streams_per_thread();  // see above
    const auto rows_as_streams = [&](int64_t lo, int64_t hi) {
      switch (M) {
        case 1: return rows_in_streams<1>(streams, x, ldx, src, lo, hi, bias, out, N);
        case 3: return rows_in_streams<3>(streams, x, ldx, src, lo, hi, bias, out, N);
        default: return rows_in_streams<4>(streams, x, ldx, src, lo, hi, bias, out, N);
      }
    };
    if (M * N * K < min_macs || nb < 2) return rows_as_streams(0, N);
    // The first 7/8 of the blocks in contiguous shares, the last 1/8 claimed kTailChunk blocks at
    // a time by whichever thread is free (see above).
    const int64_t static_blocks = nb - nb / 8;
    std::atomic<int64_t> next{static_blocks};
#pragma omp parallel
    {
      const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t first = static_blocks * t / nt, end = static_blocks * (t + 1) / nt;
      rows_as_streams(std::min(N, first * kBlock), std::min(N, end * kBlock));
      for (int64_t b; (b = next.fetch_add(kTailChunk, std::memory_order_relaxed)) < nb;)
        rows_as_streams(b * kBlock, std::min(N, (b + kTailChunk) * kBlock));
    }
    return;
  }
  parallel_for_if(M * N * K >= min_macs && nb > 1, nb, [&](int64_t b) {
    const int64_t n0 = b * kBlock, nrows = std::min(kBlock, N - n0);
    const T* w[kBlock];
    for (int64_t r = 0; r < nrows; ++r) w[r] = src.row(n0 + r);
    rows_block(M, x, ldx, w, nrows, K, bias ? bias + n0 : nullptr, out + n0, N);
  });
}

bool valid_streams(int n) { return n == 1 || n == 2 || n == 4 || n == 8; }  // rows_as_streams's counts

// The CPU's count (see rows_product_of), or QKV_ROW_STREAMS's.
int default_rows_streams() {
  if (const char* env = std::getenv("QKV_ROW_STREAMS")) {
    const int n = std::atoi(env);
    if (std::to_string(n) == env && valid_streams(n)) return n;
    fail("QKV_ROW_STREAMS", "expected 1, 2, 4 or 8 (weight streams per thread at batch 1), got '", env, "'");
  }
  if (__builtin_cpu_is("amdfam19h")) return 2;  // Zen 3 and Zen 4 (Zen 4 measured)
  return __builtin_cpu_is("amd") ? 4 : 8;
}
std::atomic<int> rows_streams_override{0};

}  // namespace

int rows_streams_per_thread() {
  static const int cpu = default_rows_streams();
  const int o = rows_streams_override.load(std::memory_order_relaxed);
  return o ? o : cpu;
}
void set_rows_streams_per_thread(int streams) {
  QKV_CHECK(streams == 0 || valid_streams(streams), "set_rows_streams_per_thread",
            "expected 0 (the CPU's count), 1, 2, 4 or 8, got ", streams);
  rows_streams_override.store(streams, std::memory_order_relaxed);
}

void rows_product(int64_t M, const float* x, int64_t ldx, const RowSource<float>& src, int64_t N, const float* bias,
                  float* out, int64_t min_macs) {
  rows_product_of(M, x, ldx, src, N, bias, out, min_macs);
}
void rows_product(int64_t M, const uint16_t* x, int64_t ldx, const RowSource<uint16_t>& src, int64_t N,
                  const float* bias, float* out, int64_t min_macs) {
  rows_product_of(M, x, ldx, src, N, bias, out, min_macs);
}

}  // namespace qkv::kernels
