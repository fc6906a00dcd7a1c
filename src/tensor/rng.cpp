#include "qkv/tensor/rng.h"

#include <algorithm>
#include <cmath>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#ifdef __AVX512F__
// GCC 12 reports its own _mm512_undefined_* inside the shift and multiply intrinsics as "may be
// used uninitialized" wherever they are inlined (a known false positive); this file only.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace qkv {
namespace {

constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t p = uint64_t(a) * b;
  hi = uint32_t(p >> 32);
  lo = uint32_t(p);
}

}  // namespace

std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo) {
  uint32_t c0 = uint32_t(counter_lo), c1 = uint32_t(counter_lo >> 32);
  uint32_t c2 = uint32_t(counter_hi), c3 = uint32_t(counter_hi >> 32);
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kMul0, c0, hi0, lo0);
    mulhilo(kMul1, c2, hi1, lo1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {c0, c1, c2, c3};
}

#ifdef __AVX512F__
namespace {
// (hi, lo) 32-bit halves of a * m for 16 lanes (vpmuludq on even and odd lanes). The 32-bit
// moves within each 64-bit pair are shuffles (swap the pair's halves) rather than 64-bit shifts:
// the multiplies and the shifts share one port on Intel's AVX-512 cores, the shuffles use another.
inline __m512i swap_halves(__m512i v) { return _mm512_shuffle_epi32(v, _MM_PERM_CDAB); }
inline void mulhilo16(__m512i a, __m512i m, __m512i& hi, __m512i& lo) {
  const __m512i pe = _mm512_mul_epu32(a, m);               // lanes 0, 2, ..: 64-bit products
  const __m512i po = _mm512_mul_epu32(swap_halves(a), m);  // lanes 1, 3, ..
  hi = _mm512_mask_blend_epi32(0xAAAA, swap_halves(pe), po);
  lo = _mm512_mask_blend_epi32(0xAAAA, pe, swap_halves(po));
}
}  // namespace
#elif defined(__AVX2__)
namespace {
// The AVX-512 helpers' 8-lane forms (AVX2 has no ternary logic or mask registers: blends by immediate).
inline __m256i swap_halves(__m256i v) { return _mm256_shuffle_epi32(v, 0xB1); }
inline void mulhilo8(__m256i a, __m256i m, __m256i& hi, __m256i& lo) {
  const __m256i pe = _mm256_mul_epu32(a, m);               // lanes 0, 2, ..: 64-bit products
  const __m256i po = _mm256_mul_epu32(swap_halves(a), m);  // lanes 1, 3, ..
  hi = _mm256_blend_epi32(swap_halves(pe), po, 0xAA);
  lo = _mm256_blend_epi32(pe, swap_halves(po), 0xAA);
}

// Blocks first .. first + n - 1 (n <= 8) of one key and counter high word, block-major into o.
void philox8(uint32_t k0, uint32_t k1, uint32_t hi2, uint32_t hi3, uint64_t first, int64_t n, uint32_t* o) {
  constexpr int kLanes = 8;
  __m256i x0, x1;
  if (uint32_t(first) <= 0xFFFFFFFFu - (kLanes - 1)) {
    x0 = _mm256_add_epi32(_mm256_set1_epi32(int(uint32_t(first))), _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0));
    x1 = _mm256_set1_epi32(int(uint32_t(first >> 32)));
  } else {
    alignas(32) uint32_t c0[kLanes], c1[kLanes];
    for (int l = 0; l < kLanes; ++l) {
      c0[l] = uint32_t(first + uint64_t(l));
      c1[l] = uint32_t((first + uint64_t(l)) >> 32);
    }
    x0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(c0));
    x1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(c1));
  }
  __m256i x2 = _mm256_set1_epi32(int(hi2)), x3 = _mm256_set1_epi32(int(hi3));
  const __m256i m0 = _mm256_set1_epi32(int(kMul0)), m1 = _mm256_set1_epi32(int(kMul1));
  uint32_t r0 = k0, r1 = k1;
  for (int round = 0; round < 10; ++round) {
    __m256i hi0, lo0, hi1, lo1;
    mulhilo8(x0, m0, hi0, lo0);
    mulhilo8(x2, m1, hi1, lo1);
    x0 = _mm256_xor_si256(_mm256_xor_si256(hi1, x1), _mm256_set1_epi32(int(r0)));
    x1 = lo1;
    x2 = _mm256_xor_si256(_mm256_xor_si256(hi0, x3), _mm256_set1_epi32(int(r1)));
    x3 = lo0;
    r0 += kWeyl0;
    r1 += kWeyl1;
  }
  // 4 x 8 -> 8 x 4: the unpacks give block 4k + j in 128-bit lane k of yj; the lane permutes order them.
  const __m256i ab_lo = _mm256_unpacklo_epi32(x0, x1), ab_hi = _mm256_unpackhi_epi32(x0, x1);
  const __m256i cd_lo = _mm256_unpacklo_epi32(x2, x3), cd_hi = _mm256_unpackhi_epi32(x2, x3);
  const __m256i y0 = _mm256_unpacklo_epi64(ab_lo, cd_lo), y1 = _mm256_unpackhi_epi64(ab_lo, cd_lo);
  const __m256i y2 = _mm256_unpacklo_epi64(ab_hi, cd_hi), y3 = _mm256_unpackhi_epi64(ab_hi, cd_hi);
  const __m256i z[4] = {_mm256_permute2x128_si256(y0, y1, 0x20), _mm256_permute2x128_si256(y2, y3, 0x20),
                        _mm256_permute2x128_si256(y0, y1, 0x31), _mm256_permute2x128_si256(y2, y3, 0x31)};
  if (n == kLanes) {
    for (int q = 0; q < 4; ++q) _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 8 * q), z[q]);
  } else {
    alignas(32) uint32_t tmp[4 * kLanes];
    for (int q = 0; q < 4; ++q) _mm256_store_si256(reinterpret_cast<__m256i*>(tmp + 8 * q), z[q]);
    std::copy(tmp, tmp + 4 * n, o);
  }
}
}  // namespace
#endif

void philox4x32_blocks(uint64_t key, uint64_t counter_hi, uint64_t counter_lo, int64_t nblocks, uint32_t* out) {
  constexpr int kLanes = 16;  // blocks per SIMD batch, structure of arrays
  const uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  const uint32_t hi2 = uint32_t(counter_hi), hi3 = uint32_t(counter_hi >> 32);
  for (int64_t b0 = 0; b0 < nblocks; b0 += kLanes) {
    const int64_t n = std::min<int64_t>(kLanes, nblocks - b0);
    uint32_t* o = out + 4 * b0;
    const uint64_t first = counter_lo + uint64_t(b0);  // lane l's counter: first + l
#ifdef __AVX512F__
    // Counter words: the low word first + l (when it does not wrap inside the batch) and one high
    // word; otherwise lane by lane.
    __m512i x0, x1;
    if (uint32_t(first) <= 0xFFFFFFFFu - (kLanes - 1)) {
      const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
      x0 = _mm512_add_epi32(_mm512_set1_epi32(int(uint32_t(first))), lane);
      x1 = _mm512_set1_epi32(int(uint32_t(first >> 32)));
    } else {
      alignas(64) uint32_t c0[kLanes], c1[kLanes];
      for (int l = 0; l < kLanes; ++l) {
        c0[l] = uint32_t(first + uint64_t(l));
        c1[l] = uint32_t((first + uint64_t(l)) >> 32);
      }
      x0 = _mm512_load_si512(c0), x1 = _mm512_load_si512(c1);
    }
    __m512i x2 = _mm512_set1_epi32(int(hi2)), x3 = _mm512_set1_epi32(int(hi3));
    const __m512i m0 = _mm512_set1_epi32(int(kMul0)), m1 = _mm512_set1_epi32(int(kMul1));
    uint32_t r0 = k0, r1 = k1;
    for (int round = 0; round < 10; ++round) {
      __m512i hi0, lo0, hi1, lo1;
      mulhilo16(x0, m0, hi0, lo0);
      mulhilo16(x2, m1, hi1, lo1);
      x0 = _mm512_ternarylogic_epi32(hi1, x1, _mm512_set1_epi32(int(r0)), 0x96);  // a ^ b ^ c
      x1 = lo1;
      x2 = _mm512_ternarylogic_epi32(hi0, x3, _mm512_set1_epi32(int(r1)), 0x96);
      x3 = lo0;
      r0 += kWeyl0;
      r1 += kWeyl1;
    }
    // 4 x 16 (word j of block l in lane l of xj) -> 16 x 4 (block-major): 32-bit and 64-bit
    // unpacks give blocks 4k + j in 128-bit lane k of yj; two 128-bit shuffles put them in order.
    const __m512i ab_lo = _mm512_unpacklo_epi32(x0, x1), ab_hi = _mm512_unpackhi_epi32(x0, x1);
    const __m512i cd_lo = _mm512_unpacklo_epi32(x2, x3), cd_hi = _mm512_unpackhi_epi32(x2, x3);
    const __m512i y0 = _mm512_unpacklo_epi64(ab_lo, cd_lo), y1 = _mm512_unpackhi_epi64(ab_lo, cd_lo);
    const __m512i y2 = _mm512_unpacklo_epi64(ab_hi, cd_hi), y3 = _mm512_unpackhi_epi64(ab_hi, cd_hi);
    const __m512i u0 = _mm512_shuffle_i32x4(y0, y1, 0x88), u1 = _mm512_shuffle_i32x4(y2, y3, 0x88);
    const __m512i u2 = _mm512_shuffle_i32x4(y0, y1, 0xDD), u3 = _mm512_shuffle_i32x4(y2, y3, 0xDD);
    const __m512i z[4] = {_mm512_shuffle_i32x4(u0, u1, 0x88), _mm512_shuffle_i32x4(u2, u3, 0x88),
                          _mm512_shuffle_i32x4(u0, u1, 0xDD), _mm512_shuffle_i32x4(u2, u3, 0xDD)};
    if (n == kLanes) {
      for (int q = 0; q < 4; ++q) _mm512_storeu_si512(o + 16 * q, z[q]);
    } else {
      alignas(64) uint32_t tmp[4 * kLanes];
      for (int q = 0; q < 4; ++q) _mm512_store_si512(tmp + 16 * q, z[q]);
      std::copy(tmp, tmp + 4 * n, o);
    }
#elif defined(__AVX2__)
    philox8(k0, k1, hi2, hi3, first, std::min<int64_t>(n, 8), o);
    if (n > 8) philox8(k0, k1, hi2, hi3, first + 8, n - 8, o + 32);
#else
    alignas(64) uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
    for (int l = 0; l < kLanes; ++l) {
      c0[l] = uint32_t(first + uint64_t(l));
      c1[l] = uint32_t((first + uint64_t(l)) >> 32);
      c2[l] = hi2;
      c3[l] = hi3;
    }
    uint32_t r0 = k0, r1 = k1;
    for (int round = 0; round < 10; ++round) {
#pragma omp simd
      for (int l = 0; l < kLanes; ++l) {
        uint64_t p0 = uint64_t(kMul0) * c0[l], p1 = uint64_t(kMul1) * c2[l];
        uint32_t n0 = uint32_t(p1 >> 32) ^ c1[l] ^ r0, n2 = uint32_t(p0 >> 32) ^ c3[l] ^ r1;
        c1[l] = uint32_t(p1);
        c3[l] = uint32_t(p0);
        c0[l] = n0;
        c2[l] = n2;
      }
      r0 += kWeyl0;
      r1 += kWeyl1;
    }
    for (int64_t l = 0; l < n; ++l) {
      o[4 * l] = c0[l];
      o[4 * l + 1] = c1[l];
      o[4 * l + 2] = c2[l];
      o[4 * l + 3] = c3[l];
    }
#endif
  }
}

uint64_t Generator::reserve(uint64_t n) {
  uint64_t base = offset_;
  offset_ += (n + 3) / 4;
  return base;
}

template <typename T>
static void fill_uniform(uint64_t seed, uint64_t base, T* out, int64_t n, T lo, T hi) {
  int64_t blocks = (n + 3) / 4;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t b = 0; b < blocks; ++b) {
    auto r = philox4x32(seed, 0, base + uint64_t(b));
    for (int j = 0; j < 4 && b * 4 + j < n; ++j) {
      T u = sizeof(T) == 4 ? T(u32_to_unit_float(r[j])) : T(r[j]) * T(1.0 / 4294967296.0);
      out[b * 4 + j] = lo + (hi - lo) * u;
    }
  }
}

// Box-Muller on pairs: each block of 4 uniforms gives 4 normals.
template <typename T>
static void fill_normal(uint64_t seed, uint64_t base, T* out, int64_t n, T mean, T std) {
  int64_t blocks = (n + 3) / 4;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t b = 0; b < blocks; ++b) {
    auto r = philox4x32(seed, 0, base + uint64_t(b));
    double z[4];
    for (int p = 0; p < 2; ++p) {
      double u1 = (double(r[2 * p]) + 1.0) / 4294967297.0;  // (0, 1): log is finite
      double u2 = double(r[2 * p + 1]) / 4294967296.0;
      double rad = std::sqrt(-2.0 * std::log(u1));
      z[2 * p] = rad * std::cos(2.0 * M_PI * u2);
      z[2 * p + 1] = rad * std::sin(2.0 * M_PI * u2);
    }
    for (int j = 0; j < 4 && b * 4 + j < n; ++j) out[b * 4 + j] = mean + std * T(z[j]);
  }
}

void Generator::uniform(float* out, int64_t n, float lo, float hi) { fill_uniform(seed_, reserve(n), out, n, lo, hi); }
void Generator::uniform(double* out, int64_t n, double lo, double hi) { fill_uniform(seed_, reserve(n), out, n, lo, hi); }
void Generator::normal(float* out, int64_t n, float mean, float std) { fill_normal(seed_, reserve(n), out, n, mean, std); }
void Generator::normal(double* out, int64_t n, double mean, double std) { fill_normal(seed_, reserve(n), out, n, mean, std); }

uint64_t Generator::randint(uint64_t bound) {
  auto r = philox4x32(seed_, 0, reserve(4));
  uint64_t x = (uint64_t(r[0]) << 32) | r[1];
  return bound ? x % bound : 0;  // bias < 2^-32 for the bounds we use
}

double Generator::uniform1() {
  auto r = philox4x32(seed_, 0, reserve(4));
  uint64_t x = ((uint64_t(r[0]) << 32) | r[1]) >> 11;  // 53 bits
  return double(x) * (1.0 / 9007199254740992.0);
}

Generator& default_generator() {
  static Generator g(0);
  return g;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace qkv
