// int8 products in the rows layout (gemm_int8_rows.h). At batch 1 a decoding step is memory-bound:
// GPT-2 124M reads 124 MB of s8 weights per token, a quarter of f32's bytes, so what matters is
// the rows layout's streaming (gemm_rows.cpp): threads own contiguous ranges of weight rows, read
// as rows_streams_per_thread() streams a thread, the last 1/8 of the rows shared. Batches take
// blocks of 4 weight rows against 4 x rows at a time (the block stays in L1 for the later x rows).
//
// AVX512-VNNI's vpdpbusd adds, per 32-bit lane, the four products of 4 u8 x values with 4 s8
// weights to the lane's int32 sum, without saturation: 64 values of K per instruction. Sums are
// exact (|sum| <= K * 255 * 127 < 2^31 for K <= 65536), so no order of additions shows.
//
// Without VNNI (AVX2, or AVX-512 without it) the kernel sums the centred products instead,
// (qx - 128) * qw, which is acc - c exactly, by the sign trick: vpmaddubsw multiplies |qx - 128|
// (u8) by qw with qx's sign moved onto it (vpsignb, s8) and adds pairs in 16 bits, which cannot
// saturate: |qx - 128| <= 127 and |qw| <= 127 by the scheme, so a pair is at most 2 * 127 * 127 =
// 32258. vpmaddwd then adds pairs of those into int32: every sum exact, the same bits as VNNI's.
// 32 values of K per step.
#include "gemm_int8_rows.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>

#include "qkv/kernels/gemm.h"
#include "qkv/kernels/parallel.h"
#include "unroll.h"

#if (defined(__AVX512VNNI__) && defined(__AVX512BW__)) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace qkv::kernels {
namespace {

constexpr int64_t kBlock = 4;       // weight rows per block at batch > 1
constexpr int64_t kTailRows = 32;   // rows a thread claims at a time in batch 1's shared tail

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
constexpr int64_t kStep = 64;  // values of K per vpdpbusd
inline __m512i load(const void* p) { return _mm512_loadu_si512(p); }
inline __m512i load_tail(const void* p, int64_t n) {  // the first n < 64 bytes, zeros after (never read past)
  return _mm512_maskz_loadu_epi8(__mmask64((uint64_t(1) << n) - 1), p);
}

// The sum of v's 16 lanes (exact in any order), with in-register shuffles: the masked forms with
// every lane selected, because GCC 12 warns about _mm512_reduce_add_epi32's undefined operand.
inline int32_t lane_sum(__m512i v) {
  constexpr __mmask16 all = 0xFFFF;
  v = _mm512_add_epi32(v, _mm512_mask_shuffle_i32x4(v, all, v, v, 0x4E));  // 256-bit halves swapped
  v = _mm512_add_epi32(v, _mm512_mask_shuffle_i32x4(v, all, v, v, 0xB1));  // 128-bit quarters swapped
  v = _mm512_add_epi32(v, _mm512_mask_shuffle_epi32(v, all, v, _MM_PERM_BADC));  // 64-bit pairs swapped
  v = _mm512_add_epi32(v, _mm512_mask_shuffle_epi32(v, all, v, _MM_PERM_CDAB));  // neighbours swapped
  return _mm512_cvtsi512_si32(v);
}

// acc[m * NR + r] = sum_k x[m * K + k] * w[r][k] for MR x rows and NR weight rows.
template <int MR, int NR>
void dot_tile(const uint8_t* x, int64_t K, const int8_t* const* w, int32_t* acc) {
  __m512i a[MR][NR];
  QKV_UNROLL
  for (int m = 0; m < MR; ++m)
    QKV_UNROLL
    for (int r = 0; r < NR; ++r) a[m][r] = _mm512_setzero_si512();
  int64_t k = 0;
  for (; k + kStep <= K; k += kStep) {
    __m512i xv[MR];
    QKV_UNROLL
    for (int m = 0; m < MR; ++m) xv[m] = load(x + m * K + k);
    QKV_UNROLL
    for (int r = 0; r < NR; ++r) {
      const __m512i wv = load(w[r] + k);
      QKV_UNROLL
      for (int m = 0; m < MR; ++m) a[m][r] = _mm512_dpbusd_epi32(a[m][r], xv[m], wv);
    }
  }
  if (k < K) {
    __m512i xv[MR];
    QKV_UNROLL
    for (int m = 0; m < MR; ++m) xv[m] = load_tail(x + m * K + k, K - k);
    QKV_UNROLL
    for (int r = 0; r < NR; ++r) {
      const __m512i wv = load_tail(w[r] + k, K - k);
      QKV_UNROLL
      for (int m = 0; m < MR; ++m) a[m][r] = _mm512_dpbusd_epi32(a[m][r], xv[m], wv);
    }
  }
  QKV_UNROLL
  for (int m = 0; m < MR; ++m)
    QKV_UNROLL
    for (int r = 0; r < NR; ++r) acc[m * NR + r] = lane_sum(a[m][r]);
}
constexpr bool kCentred = false;  // dot_tile's sums are acc (c still to subtract)
#elif defined(__AVX2__)
constexpr int64_t kStep = 32;  // values of K per vpmaddubsw
inline __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

inline int32_t lane_sum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// acc[m * NR + r] = sum_k (x[m * K + k] - 128) * w[r][k] for MR x rows and NR weight rows.
template <int MR, int NR>
void dot_tile(const uint8_t* x, int64_t K, const int8_t* const* w, int32_t* acc) {
  const __m256i flip = _mm256_set1_epi8(char(0x80)), ones = _mm256_set1_epi16(1);
  __m256i a[MR][NR];
  QKV_UNROLL
  for (int m = 0; m < MR; ++m)
    QKV_UNROLL
    for (int r = 0; r < NR; ++r) a[m][r] = _mm256_setzero_si256();
  int64_t k = 0;
  for (; k + kStep <= K; k += kStep) {
    __m256i xs[MR], xa[MR];  // qx - 128 as s8, and its magnitude as u8
    QKV_UNROLL
    for (int m = 0; m < MR; ++m) {
      xs[m] = _mm256_xor_si256(load(x + m * K + k), flip);
      xa[m] = _mm256_abs_epi8(xs[m]);
    }
    QKV_UNROLL
    for (int r = 0; r < NR; ++r) {
      const __m256i wv = load(w[r] + k);
      QKV_UNROLL
      for (int m = 0; m < MR; ++m) {
        const __m256i pairs = _mm256_maddubs_epi16(xa[m], _mm256_sign_epi8(wv, xs[m]));
        a[m][r] = _mm256_add_epi32(a[m][r], _mm256_madd_epi16(pairs, ones));
      }
    }
  }
  QKV_UNROLL
  for (int m = 0; m < MR; ++m)
    QKV_UNROLL
    for (int r = 0; r < NR; ++r) {
      int32_t s = lane_sum(a[m][r]);
      for (int64_t j = k; j < K; ++j) s += (int32_t(x[m * K + j]) - 128) * int32_t(w[r][j]);
      acc[m * NR + r] = s;
    }
}
constexpr bool kCentred = true;  // dot_tile's sums are acc - c
#else
template <int MR, int NR>
void dot_tile(const uint8_t* x, int64_t K, const int8_t* const* w, int32_t* acc) {
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) {
      int32_t s = 0;
      for (int64_t k = 0; k < K; ++k) s += int32_t(x[m * K + k]) * int32_t(w[r][k]);
      acc[m * NR + r] = s;
    }
}
constexpr bool kCentred = false;
#endif

// What dequantize_row (gemm_int8.cpp) computes for one output: the same expression, the same bits.
inline float dequantize(int32_t acc, int32_t c, float sx, float sw, const float* bias) {
  return std::fma(float(acc - c), sx * sw, bias ? *bias : 0.f);
}

struct Args {
  const uint8_t* xq;
  const float* sx;
  const int8_t* q;
  int64_t ldq, N, K;
  const float* sw;
  const int32_t* c;
  const float* bias;
  float* out;
  int64_t ldo;
  const int8_t* row(int64_t n) const { return q + n * ldq; }
  void finish(int64_t m, int64_t n, int32_t acc) const {  // acc: dot_tile's sum
    out[m * ldo + n] = dequantize(acc, kCentred ? 0 : c[n], sx[m], sw[n], bias ? bias + n : nullptr);
  }
};

// Batch 1: rows [lo, hi) as Streams streams, a row of each of the range's Streams equal parts at
// a time, then the rows left over one by one. (Runs of 4 consecutive rows per stream, 3 KB for
// GPT-2's 768-byte rows, were 1.2-1.5x slower: `bench_matmul gpt2stream`, AMD EPYC Zen 4.)
template <int Streams>
void rows_in_streams(const Args& a, int64_t lo, int64_t hi) {
  const int64_t per = (hi - lo) / Streams;
  const int8_t* w[Streams];
  int32_t acc[Streams];
  for (int64_t j = 0; j < per; ++j) {
    for (int s = 0; s < Streams; ++s) w[s] = a.row(lo + s * per + j);
    dot_tile<1, Streams>(a.xq, a.K, w, acc);
    for (int s = 0; s < Streams; ++s) a.finish(0, lo + s * per + j, acc[s]);
  }
  for (int64_t n = lo + Streams * per; n < hi; ++n) {
    const int8_t* wn = a.row(n);
    dot_tile<1, 1>(a.xq, a.K, &wn, acc);
    a.finish(0, n, acc[0]);
  }
}

void batch1(const Args& a, int64_t min_macs) {
  const int streams = rows_streams_per_thread();
  const auto as_streams = [&](int64_t lo, int64_t hi) {
    switch (streams) {
      case 1: return rows_in_streams<1>(a, lo, hi);
      case 2: return rows_in_streams<2>(a, lo, hi);
      case 4: return rows_in_streams<4>(a, lo, hi);
      default: return rows_in_streams<8>(a, lo, hi);
    }
  };
  if (a.N * a.K < min_macs || a.N < 2 * kTailRows) return as_streams(0, a.N);
  // The first 7/8 of the rows in contiguous shares, the rest claimed by whichever thread is free
  // (the two threads of a VM stream at different paces: gemm_rows.cpp).
  const int64_t static_rows = a.N - a.N / 8;
  std::atomic<int64_t> next{static_rows};
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    as_streams(static_rows * t / nt, static_rows * (t + 1) / nt);
    for (int64_t n; (n = next.fetch_add(kTailRows, std::memory_order_relaxed)) < a.N;)
      as_streams(n, std::min(a.N, n + kTailRows));
  }
}

// mr <= 4 x rows from row m0 against nr <= kBlock weight rows from row n0.
template <int MR>
void block_rows(const Args& a, int64_t m0, int64_t n0, int64_t nr) {
  const uint8_t* x = a.xq + m0 * a.K;
  int32_t acc[MR * kBlock];
  if (nr == kBlock) {
    const int8_t* w[kBlock] = {a.row(n0), a.row(n0 + 1), a.row(n0 + 2), a.row(n0 + 3)};
    dot_tile<MR, kBlock>(x, a.K, w, acc);
    for (int m = 0; m < MR; ++m)
      for (int r = 0; r < kBlock; ++r) a.finish(m0 + m, n0 + r, acc[m * kBlock + r]);
    return;
  }
  for (int64_t r = 0; r < nr; ++r) {
    const int8_t* w = a.row(n0 + r);
    dot_tile<MR, 1>(x, a.K, &w, acc);
    for (int m = 0; m < MR; ++m) a.finish(m0 + m, n0 + r, acc[m]);
  }
}

}  // namespace

const char* int8_rows_kernel_isa() {
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  return "AVX512-VNNI";
#elif defined(__AVX2__)
  return "AVX2";
#else
  return nullptr;
#endif
}

void int8_rows_product(int64_t M, const uint8_t* xq, const float* sx, const int8_t* q, int64_t ldq, int64_t N,
                       int64_t K, const float* sw, const int32_t* c, const float* bias, float* out, int64_t ldo,
                       int64_t min_macs) {
  const Args a{xq, sx, q, ldq, N, K, sw, c, bias, out, ldo};
  if (M == 1) return batch1(a, min_macs);
  const int64_t nb = (N + kBlock - 1) / kBlock;
  parallel_for_if(M * N * K >= min_macs && nb > 1, nb, [&](int64_t b) {
    const int64_t n0 = b * kBlock, nr = std::min(kBlock, N - n0);
    for (int64_t m0 = 0; m0 < M; m0 += 4) {
      switch (std::min<int64_t>(4, M - m0)) {
        case 1: block_rows<1>(a, m0, n0, nr); break;
        case 2: block_rows<2>(a, m0, n0, nr); break;
        case 3: block_rows<3>(a, m0, n0, nr); break;
        default: block_rows<4>(a, m0, n0, nr);
      }
    }
  });
}

}  // namespace qkv::kernels
