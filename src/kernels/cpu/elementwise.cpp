#include "qkv/kernels/elementwise.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "qkv/kernels/parallel.h"
#include "qkv/kernels/softmax.h"
#include "qkv/tensor/strided.h"

#include "avx2_lanes.h"
#include "dispatch.h"

#if defined(__AVX512F__)
#include <immintrin.h>
// GCC 12 reports its own _mm512_undefined_* inside masked intrinsics as "may be used
// uninitialized" wherever they are inlined (a known false positive); this file only.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace qkv::kernels {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;
constexpr double kGeluTanhC = 0.044715;

// ---- f32 activations without libm calls, written so that GCC vectorises the loops (AVX-512
// here); exp is kernels::vexp. f64 keeps exact libm (it serves gradient checks). Accuracy is
// checked against double precision over [-30, 30] by tests/ops (Elementwise.F32ActivationsAccurate).

// tanh: |x| < 0.625 the Cephes tanhf odd polynomial; else sign(x) (1 - 2 / (exp(2|x|) + 1)),
// which saturates to +-1 (exp -> inf) without NaN.
inline float vtanh(float x) {
  const float a = std::fabs(x), z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  const float large = std::copysign(1.0f - 2.0f / (vexp(2.0f * a) + 1.0f), x);
  return a < 0.625f ? small : large;
}

// sigmoid(x) = 1 / (1 + exp(-x)): exp(-x) = inf gives 0, 0 gives 1.
inline float vsigmoid(float x) { return 1.0f / (1.0f + vexp(-x)); }

// 1 / d for d in [1, 16] without a divide (a vector divide costs more than the whole GELU
// polynomial): the exponent-flip guess 0x7EF311C3 - bits(d) (relative error <= 1/8), then three
// Newton steps y (2 - d y), each squaring the error: 1/8 -> 2^-6 -> 2^-12 -> 2^-24.
inline float vrecip(float d) {
  float y = std::bit_cast<float>(0x7EF311C3 - std::bit_cast<int32_t>(d));
  y = y * (2.0f - d * y);
  y = y * (2.0f - d * y);
  return y * (2.0f - d * y);
}

// GELU's Phi(x) = P(N(0,1) <= x) and exp(-x^2/2), from one tail evaluation:
//   Phi(-a) = exp(-a^2/2) / 2 * q(a), a = |x|, q(a) = erfc(a/sqrt(2)) exp(a^2/2),
// q a degree-10 polynomial in t = 1 / (1 + 0.4 a) (least-squares fit of the relative error on
// [0, 14]: 1.1e-8 in exact arithmetic, 3e-7 evaluated in f32), Phi(x) = x < 0 ? Phi(-a) : 1 - Phi(-a)
// (no cancellation: Phi(-a) <= 1/2). a^2 is split exactly (hi + lo, one FMA) so that exp(-a^2/2)
// keeps full relative accuracy for large a. a is clamped at 14: Phi(-14) underflows f32 anyway.
struct PhiExp {
  float phi;  // Phi(x)
  float e;    // exp(-x^2 / 2)
};
// q(t), highest degree first (Horner).
constexpr float kPhiTail[11] = {5.754177272e-02f, -3.148842454e-01f, 6.696126461e-01f, -6.147637963e-01f,
                                1.208269447e-01f, 1.519724634e-02f,  1.560184956e-01f, 2.730147243e-01f,
                                3.181941807e-01f, 3.192456067e-01f,  -3.535410315e-06f};
inline PhiExp vphi(float x) {
  const float ax = std::fabs(x), a = ax < 14.0f ? ax : 14.0f;
  const float t = vrecip(1.0f + 0.4f * a);
  float q = kPhiTail[0];
  for (int i = 1; i < 11; ++i) q = q * t + kPhiTail[i];
  const float hi = a * a, lo = std::fma(a, a, -hi);  // a^2 = hi + lo exactly
  const float e = vexp(-0.5f * hi) * (1.0f - 0.5f * lo);
  const float tail = 0.5f * e * q;  // Phi(-a)
  return {x < 0.0f ? tail : 1.0f - tail, e};
}

#if defined(__AVX512F__)
// GELU (erf), 16 floats at a time with masked loads and stores for the remainder (every element
// takes this path): vphi's algorithm in AVX-512 instructions GCC does not emit from the scalar
// form, which spent about half its instructions on range handling and the reciprocal:
//   t = 1 / (1 + 0.4 a): rcp14 (relative error < 2^-14) and one Newton step (< 2^-27);
//   exp(-a^2 / 2): vexp's reduction and polynomial without its range clamps (the argument lies
//   in [-98, 0]; below vexp's lower limit the result is 0, as vexp gives);
//   q(t), the exact split of a^2 and the tail formula exactly as vphi.
// Accuracy is checked with the scalar paths' bound (tests/ops, F32ActivationsAccurate...).
struct PhiExp16 {
  __m512 phi, e;  // Phi(x), exp(-x^2 / 2)
};
inline PhiExp16 vphi16(__m512 xv) {
  const __m512 a = _mm512_min_ps(_mm512_abs_ps(xv), _mm512_set1_ps(14.0f));
  const __m512 d = _mm512_fmadd_ps(a, _mm512_set1_ps(0.4f), _mm512_set1_ps(1.0f));
  __m512 t = _mm512_rcp14_ps(d);
  t = _mm512_mul_ps(t, _mm512_fnmadd_ps(d, t, _mm512_set1_ps(2.0f)));
  __m512 q = _mm512_set1_ps(kPhiTail[0]);
  for (int c = 1; c < 11; ++c) q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(kPhiTail[c]));
  const __m512 hi = _mm512_mul_ps(a, a), lo = _mm512_fmsub_ps(a, a, hi);  // a^2 = hi + lo exactly
  // exp(z), z = -hi / 2 in [-98, 0]: z = k ln2 + r, exp(r) by vexp's polynomial, 2^k from bits.
  const __m512 z = _mm512_mul_ps(hi, _mm512_set1_ps(-0.5f));
  const __m512 zc = _mm512_max_ps(z, _mm512_set1_ps(exp_f32::kLo));
  const __m512 kr = _mm512_fmadd_ps(zc, _mm512_set1_ps(exp_f32::kLog2e), _mm512_set1_ps(exp_f32::kRound));
  const __m512 k = _mm512_sub_ps(kr, _mm512_set1_ps(exp_f32::kRound));
  const __m512i ki = _mm512_sub_epi32(_mm512_castps_si512(kr), _mm512_set1_epi32(0x4B400000));
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(exp_f32::kLn2Hi), zc);
  r = _mm512_fmadd_ps(k, _mm512_set1_ps(exp_f32::kLn2Lo), r);
  __m512 p = _mm512_set1_ps(exp_f32::kPoly[0]);
  for (int c = 1; c < 6; ++c) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(exp_f32::kPoly[c]));
  const __m512 er = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  const __m512 two_k = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(ki, _mm512_set1_epi32(127)), 23));
  __m512 e = _mm512_mul_ps(er, two_k);
  e = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(z, _mm512_set1_ps(exp_f32::kLo), _CMP_GE_OQ), e);
  e = _mm512_mul_ps(e, _mm512_fnmadd_ps(_mm512_set1_ps(0.5f), lo, _mm512_set1_ps(1.0f)));  // exp(-lo / 2)
  const __m512 tail = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), e), q);  // Phi(-a)
  const __mmask16 neg = _mm512_cmp_ps_mask(xv, _mm512_setzero_ps(), _CMP_LT_OQ);
  return {_mm512_mask_blend_ps(neg, _mm512_sub_ps(_mm512_set1_ps(1.0f), tail), tail), e};
}

// The mask of the 16-float block i of n floats.
inline __mmask16 block_mask(int64_t n, int64_t i) {
  const int64_t rest = n - i * 16;
  return rest >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << rest) - 1);
}

// y = x Phi(x)
void gelu_erf_forward_avx512(int64_t n, const float* x, float* y) {
  parallel_for_if(n >= kParallelGrain, (n + 15) / 16, [&](int64_t i) {
    const __mmask16 m = block_mask(n, i);
    const __m512 xv = _mm512_maskz_loadu_ps(m, x + i * 16);
    _mm512_mask_storeu_ps(y + i * 16, m, _mm512_mul_ps(xv, vphi16(xv).phi));
  });
}

// gx = gy (Phi(x) + x phi(x)), phi(x) = exp(-x^2 / 2) / sqrt(2 pi): derivative()'s f32 formula.
void gelu_erf_backward_avx512(int64_t n, const float* x, const float* gy, float* gx) {
  parallel_for_if(n >= kParallelGrain, (n + 15) / 16, [&](int64_t i) {
    const __mmask16 m = block_mask(n, i);
    const __m512 xv = _mm512_maskz_loadu_ps(m, x + i * 16), g = _mm512_maskz_loadu_ps(m, gy + i * 16);
    const PhiExp16 p = vphi16(xv);
    const __m512 d = _mm512_fmadd_ps(xv, _mm512_mul_ps(_mm512_set1_ps(float(kInvSqrt2Pi)), p.e), p.phi);
    _mm512_mask_storeu_ps(gx + i * 16, m, _mm512_mul_ps(g, d));
  });
}
#elif defined(__AVX2__)
// GELU (erf) for CPUs without AVX-512, 8 floats at a time, the last ones through lane masks
// (load8, store8): the AVX-512 kernel's algorithm (above) in AVX2, where GCC's vectorisation of
// vphi ran at about 20 ns an element on a Zen 1 (this: 3.1 forward, 3.3 backward, one thread).
// rcp_ps is only good to 1.5 * 2^-12, so t takes two Newton steps where rcp14 needs one; the masks
// are comparison lanes (and, blendv).
struct PhiExp8 {
  __m256 phi, e;  // Phi(x), exp(-x^2 / 2)
};
inline PhiExp8 vphi8(__m256 xv) {
  const __m256 a = _mm256_min_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), xv), _mm256_set1_ps(14.0f));
  const __m256 d = _mm256_fmadd_ps(a, _mm256_set1_ps(0.4f), _mm256_set1_ps(1.0f));
  __m256 t = _mm256_rcp_ps(d);
  t = _mm256_mul_ps(t, _mm256_fnmadd_ps(d, t, _mm256_set1_ps(2.0f)));
  t = _mm256_mul_ps(t, _mm256_fnmadd_ps(d, t, _mm256_set1_ps(2.0f)));
  __m256 q = _mm256_set1_ps(kPhiTail[0]);
  for (int c = 1; c < 11; ++c) q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(kPhiTail[c]));
  const __m256 hi = _mm256_mul_ps(a, a), lo = _mm256_fmsub_ps(a, a, hi);  // a^2 = hi + lo exactly
  // exp(z), z = -hi / 2 in [-98, 0], as in vphi16.
  const __m256 z = _mm256_mul_ps(hi, _mm256_set1_ps(-0.5f));
  const __m256 zc = _mm256_max_ps(z, _mm256_set1_ps(exp_f32::kLo));
  const __m256 kr = _mm256_fmadd_ps(zc, _mm256_set1_ps(exp_f32::kLog2e), _mm256_set1_ps(exp_f32::kRound));
  const __m256 k = _mm256_sub_ps(kr, _mm256_set1_ps(exp_f32::kRound));
  const __m256i ki = _mm256_sub_epi32(_mm256_castps_si256(kr), _mm256_set1_epi32(0x4B400000));
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(exp_f32::kLn2Hi), zc);
  r = _mm256_fmadd_ps(k, _mm256_set1_ps(exp_f32::kLn2Lo), r);
  __m256 p = _mm256_set1_ps(exp_f32::kPoly[0]);
  for (int c = 1; c < 6; ++c) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(exp_f32::kPoly[c]));
  const __m256 er = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0f));
  const __m256 two_k = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(ki, _mm256_set1_epi32(127)), 23));
  __m256 e = _mm256_mul_ps(er, two_k);
  e = _mm256_and_ps(e, _mm256_cmp_ps(z, _mm256_set1_ps(exp_f32::kLo), _CMP_GE_OQ));
  e = _mm256_mul_ps(e, _mm256_fnmadd_ps(_mm256_set1_ps(0.5f), lo, _mm256_set1_ps(1.0f)));  // exp(-lo / 2)
  const __m256 tail = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), e), q);  // Phi(-a)
  const __m256 neg = _mm256_cmp_ps(xv, _mm256_setzero_ps(), _CMP_LT_OQ);
  return {_mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(1.0f), tail), tail, neg), e};
}

// y = x Phi(x)
void gelu_erf_forward_avx2(int64_t n, const float* x, float* y) {
  parallel_for_if(n >= kParallelGrain, (n + 7) / 8, [&](int64_t i) {
    const __m256 xv = load8(x + i * 8, n - i * 8);
    store8(y + i * 8, n - i * 8, _mm256_mul_ps(xv, vphi8(xv).phi));
  });
}

// gx = gy (Phi(x) + x phi(x)), as gelu_erf_backward_avx512.
void gelu_erf_backward_avx2(int64_t n, const float* x, const float* gy, float* gx) {
  parallel_for_if(n >= kParallelGrain, (n + 7) / 8, [&](int64_t i) {
    const __m256 xv = load8(x + i * 8, n - i * 8), g = load8(gy + i * 8, n - i * 8);
    const PhiExp8 p = vphi8(xv);
    const __m256 d = _mm256_fmadd_ps(xv, _mm256_mul_ps(_mm256_set1_ps(float(kInvSqrt2Pi)), p.e), p.phi);
    store8(gx + i * 8, n - i * 8, _mm256_mul_ps(g, d));
  });
}
#endif

template <typename T>
inline T apply_unary(Unary op, T x) {
  constexpr bool f32 = std::is_same_v<T, float>;
  switch (op) {
    case Unary::neg: return -x;
    case Unary::exp: return vexp(x);  // f32: kernels::vexp (~2 ulp, vectorises); f64: std::exp
    case Unary::log: return std::log(x);
    case Unary::sqrt: return std::sqrt(x);
    case Unary::abs: return std::abs(x);
    case Unary::tanh:
      if constexpr (f32) return vtanh(x);
      return std::tanh(x);
    case Unary::sigmoid:
      if constexpr (f32) return vsigmoid(x);
      return T(1) / (T(1) + std::exp(-x));
    case Unary::relu: return x < T(0) ? T(0) : x;  // NaN stays NaN, -0 stays -0 (torch.relu)
    case Unary::gelu_erf:
      if constexpr (f32) return x * vphi(x).phi;
      return T(0.5) * x * (T(1) + std::erf(x * T(kInvSqrt2)));
    case Unary::gelu_tanh:
      // 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)
      if constexpr (f32) return x * vsigmoid(float(2 * kSqrt2OverPi) * (x + float(kGeluTanhC) * x * x * x));
      return T(0.5) * x * (T(1) + std::tanh(T(kSqrt2OverPi) * (x + T(kGeluTanhC) * x * x * x)));
    case Unary::silu:
      if constexpr (f32) return x * vsigmoid(x);
      return x / (T(1) + std::exp(-x));
    case Unary::square: return x * x;
    case Unary::reciprocal: return T(1) / x;
  }
  return x;
}

// d op(x) / dx, written with y = op(x) where that is cheaper.
template <typename T>
inline T derivative(Unary op, T x, T y) {
  constexpr bool f32 = std::is_same_v<T, float>;
  switch (op) {
    case Unary::neg: return T(-1);
    case Unary::exp: return y;
    case Unary::log: return T(1) / x;
    case Unary::sqrt: return T(0.5) / y;
    case Unary::abs: return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
    case Unary::tanh: return T(1) - y * y;
    case Unary::sigmoid: return y * (T(1) - y);
    case Unary::relu: return x <= T(0) ? T(0) : T(1);  // NaN passes its gradient (torch's threshold_backward)
    case Unary::gelu_erf: {  // Phi(x) + x phi(x)
      if constexpr (f32) {
        const PhiExp p = vphi(x);
        return p.phi + x * (float(kInvSqrt2Pi) * p.e);
      }
      T cdf = T(0.5) * (T(1) + std::erf(x * T(kInvSqrt2)));
      T pdf = T(kInvSqrt2Pi) * std::exp(T(-0.5) * x * x);
      return cdf + x * pdf;
    }
    case Unary::gelu_tanh: {
      T dinner = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluTanhC) * x * x);
      if constexpr (f32) {  // y = x s, s = sigmoid(2u) = 1 / (1 + e), e = exp(-2u): y' = s + x s (1 - s) 2u'
        const float e = vexp(-2.0f * float(kSqrt2OverPi) * (x + float(kGeluTanhC) * x * x * x));
        const float s = 1.0f / (1.0f + e), s1 = e > 1.0f ? 1.0f - s : e * s;  // 1 - s, no cancellation or inf*0
        return s + x * (s * s1) * (2.0f * dinner);
      }
      T inner = T(kSqrt2OverPi) * (x + T(kGeluTanhC) * x * x * x);
      T t = std::tanh(inner);
      return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * dinner;
    }
    case Unary::silu: {
      if constexpr (f32) {  // s = 1 / (1 + e), e = exp(-x); 1 - s = e s for s >= 1/2 (no cancellation)
        const float e = vexp(-x), s = 1.0f / (1.0f + e), s1 = e > 1.0f ? 1.0f - s : e * s;
        return s * (1.0f + x * s1);
      }
      T s = T(1) / (T(1) + std::exp(-x));
      return s * (T(1) + x * (T(1) - s));
    }
    case Unary::square: return T(2) * x;
    case Unary::reciprocal: return -y * y;
  }
  return T(0);
}

// Runs body(i) for i in [0, n), in parallel when n is large. Small n never enters a region:
// one with a false if-clause still costs a one-thread team (kernels/parallel.h).
template <typename Body>
inline void parallel_for(int64_t n, Body&& body) {
  if (n < kParallelGrain) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) body(i);
}

// y[i] = f(x[i]) and gx[i] = f(x[i], y[i], gy[i]) for a stateless f: the pointers are locals
// (restrict, not re-read through a closure), so the loop vectorises with f inlined.
template <typename T, typename F>
void map_unary(int64_t n, const T* __restrict x, T* __restrict y, F f) {
  if (n < kParallelGrain) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
    return;
  }
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}
template <typename T, typename F>
void map_backward(int64_t n, const T* __restrict x, const T* __restrict y, const T* __restrict gy,
                  T* __restrict gx, F f) {
  if (n < kParallelGrain) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) gx[i] = f(x[i], y[i], gy[i]);
    return;
  }
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) gx[i] = f(x[i], y[i], gy[i]);
}

}  // namespace

void unary(Unary op, const Tensor& x_in, Tensor& out) {
  Tensor x = x_in.contiguous();
  dispatch_float(x.dtype(), "unary", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* op_ = out.data<T>();
    int64_t n = x.numel();
    // A switch per op outside the loop lets each loop vectorise.
    switch (op) {
#define QKV_UNARY_CASE(OP) \
  case Unary::OP: map_unary(n, xp, op_, [](T v) { return apply_unary(Unary::OP, v); }); break;
      QKV_UNARY_CASE(neg) QKV_UNARY_CASE(exp) QKV_UNARY_CASE(log) QKV_UNARY_CASE(sqrt) QKV_UNARY_CASE(abs)
      QKV_UNARY_CASE(tanh) QKV_UNARY_CASE(sigmoid) QKV_UNARY_CASE(relu)
      QKV_UNARY_CASE(gelu_tanh) QKV_UNARY_CASE(silu) QKV_UNARY_CASE(square) QKV_UNARY_CASE(reciprocal)
#undef QKV_UNARY_CASE
      case Unary::gelu_erf:
#if defined(__AVX512F__)
        if constexpr (std::is_same_v<T, float>) {
          gelu_erf_forward_avx512(n, xp, op_);
          break;
        }
#elif defined(__AVX2__)
        if constexpr (std::is_same_v<T, float>) {
          gelu_erf_forward_avx2(n, xp, op_);
          break;
        }
#endif
        map_unary(n, xp, op_, [](T v) { return apply_unary(Unary::gelu_erf, v); });
        break;
    }
  });
}

void unary_backward(Unary op, const Tensor& x, const Tensor& y, const Tensor& gy, Tensor& gx) {
  dispatch_float(x.dtype(), "unary_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    const T* yp = y.data<T>();
    const T* gp = gy.data<T>();
    T* out = gx.data<T>();
    int64_t n = x.numel();
    // One loop per op (the switch outside) so that each vectorises.
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<T, float>)
      if (op == Unary::gelu_erf) return gelu_erf_backward_avx512(n, xp, gp, out);
#elif defined(__AVX2__)
    if constexpr (std::is_same_v<T, float>)
      if (op == Unary::gelu_erf) return gelu_erf_backward_avx2(n, xp, gp, out);
#endif
    switch (op) {
#define QKV_UNARY_BWD_CASE(OP) \
  case Unary::OP: \
    map_backward(n, xp, yp, gp, out, [](T xv, T yv, T g) { return g * derivative(Unary::OP, xv, yv); }); \
    break;
      QKV_UNARY_BWD_CASE(neg) QKV_UNARY_BWD_CASE(exp) QKV_UNARY_BWD_CASE(log) QKV_UNARY_BWD_CASE(sqrt)
      QKV_UNARY_BWD_CASE(abs) QKV_UNARY_BWD_CASE(tanh) QKV_UNARY_BWD_CASE(sigmoid)
      case Unary::relu:  // a select, not g * 0: a NaN or inf gradient where x <= 0 gives 0 (threshold_backward)
        map_backward(n, xp, yp, gp, out, [](T xv, T, T g) { return xv <= T(0) ? T(0) : g; });
        break;
      QKV_UNARY_BWD_CASE(gelu_erf) QKV_UNARY_BWD_CASE(gelu_tanh) QKV_UNARY_BWD_CASE(silu)
      QKV_UNARY_BWD_CASE(square) QKV_UNARY_BWD_CASE(reciprocal)
#undef QKV_UNARY_BWD_CASE
    }
  });
}

void pow_scalar(const Tensor& x_in, double p, Tensor& out) {
  Tensor x = x_in.contiguous();
  dispatch_float(x.dtype(), "pow", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* o = out.data<T>();
    parallel_for(x.numel(), [&](int64_t i) { o[i] = std::pow(xp[i], T(p)); });
  });
}

void pow_scalar_backward(const Tensor& x, double p, const Tensor& gy, Tensor& gx) {
  dispatch_float(x.dtype(), "pow_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    const T* gp = gy.data<T>();
    T* o = gx.data<T>();
    parallel_for(x.numel(), [&](int64_t i) { o[i] = p == 0 ? T(0) : gp[i] * T(p) * std::pow(xp[i], T(p - 1)); });
  });
}

void binary(Binary op, const Tensor& a, const Tensor& b, Tensor& out) {
  dispatch_float(out.dtype(), "binary", [&](auto tag) {
    using T = decltype(tag);
    const T* ap = a.data<T>();
    const T* bp = b.data<T>();
    T* o = out.data<T>();
    auto run = [&](auto f) {
      if (a.shape() == out.shape() && b.shape() == out.shape() && a.is_contiguous() && b.is_contiguous()) {
        parallel_for(out.numel(), [&](int64_t i) { o[i] = f(ap[i], bp[i]); });
        return;
      }
      if (b.numel() == 1 && a.shape() == out.shape() && a.is_contiguous()) {
        T bv = *bp;
        parallel_for(out.numel(), [&](int64_t i) { o[i] = f(ap[i], bv); });
        return;
      }
      // General case: broadcast strides (0 on broadcast axes), one strided row at a time.
      const Shape& os = out.shape();
      int nd = os.ndim();
      Shape sa = os, sb = os;
      for (int d = 0; d < nd; ++d) {
        int da = d - (nd - a.ndim()), db = d - (nd - b.ndim());
        sa[d] = (da >= 0 && a.shape()[da] != 1) ? a.strides()[da] : 0;
        sb[d] = (db >= 0 && b.shape()[db] != 1) ? b.strides()[db] : 0;
      }
      Shape so = Shape::contiguous_strides(os);
      int64_t ia = nd ? sa[nd - 1] : 0, ib = nd ? sb[nd - 1] : 0;
      int64_t inner = nd ? os[nd - 1] : 1;
      int64_t rows = inner ? out.numel() / inner : 0;
      Shape outer = os;
      if (nd) outer[nd - 1] = 1;
      parallel_for_if(out.numel() >= kParallelGrain && rows > 1, rows, [&](int64_t r) {
        int64_t offa = strided_offset(r, outer, sa), offb = strided_offset(r, outer, sb);
        T* orow = o + r * inner;
        for (int64_t i = 0; i < inner; ++i) orow[i] = f(ap[offa + i * ia], bp[offb + i * ib]);
      });
      (void)so;
    };
    switch (op) {
      case Binary::add: run([](T x, T y) { return x + y; }); break;
      case Binary::sub: run([](T x, T y) { return x - y; }); break;
      case Binary::mul: run([](T x, T y) { return x * y; }); break;
      case Binary::div: run([](T x, T y) { return x / y; }); break;
    }
  });
}

void affine(const Tensor& x_in, double alpha, double beta, Tensor& out) {
  Tensor x = x_in.contiguous();
  dispatch_float(x.dtype(), "affine", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* o = out.data<T>();
    T a = T(alpha), c = T(beta);
    parallel_for(x.numel(), [&](int64_t i) { o[i] = a * xp[i] + c; });
  });
}

void add_inplace(Tensor& dst, const Tensor& src_in) {
  QKV_CHECK(dst.shape() == src_in.shape() && dst.dtype() == src_in.dtype(), "add_inplace", "cannot add ",
            src_in.str(), " into ", dst.str());
  QKV_CHECK(dst.is_contiguous(), "add_inplace", "destination must be contiguous");
  Tensor src = src_in.contiguous();
  dispatch_float(dst.dtype(), "add_inplace", [&](auto tag) {
    using T = decltype(tag);
    T* d = dst.data<T>();
    const T* s = src.data<T>();
    parallel_for(dst.numel(), [&](int64_t i) { d[i] += s[i]; });
  });
}

void scale_inplace(Tensor& dst, double s) {
  QKV_CHECK(dst.is_contiguous(), "scale_inplace", "destination must be contiguous");
  dispatch_float(dst.dtype(), "scale_inplace", [&](auto tag) {
    using T = decltype(tag);
    T* d = dst.data<T>();
    T sv = T(s);
    parallel_for(dst.numel(), [&](int64_t i) { d[i] *= sv; });
  });
}

void sum_to(const Tensor& g_in, const Shape& target, Tensor& out) {
  Tensor g = g_in.contiguous();
  const Shape& gs = g.shape();
  int nd = gs.ndim(), lead = nd - target.ndim();
  QKV_CHECK(lead >= 0, "sum_to", "cannot sum ", gs.str(), " to ", target.str());
  // Output strides per gradient axis: 0 where the target broadcast (so those axes accumulate).
  Shape ts = Shape::contiguous_strides(target);
  Shape os = gs;
  for (int d = 0; d < nd; ++d) {
    int td = d - lead;
    os[d] = (td >= 0 && target[td] != 1) ? ts[td] : 0;
    QKV_CHECK(td < 0 || target[td] == 1 || target[td] == gs[d], "sum_to", "cannot sum ", gs.str(), " to ", target.str());
  }
  dispatch_float(g.dtype(), "sum_to", [&](auto tag) {
    using T = decltype(tag);
    const T* gp = g.data<T>();
    T* o = out.data<T>();
    int64_t tn = target.numel();
    for (int64_t i = 0; i < tn; ++i) o[i] = T(0);
    Shape gst = Shape::contiguous_strides(gs);
    int64_t inner_o = nd ? os[nd - 1] : 0;
    // Serial accumulation keeps results independent of the thread count (determinism).
    for_each_row<2>(gs, {&gst, &os}, [&](const std::array<int64_t, 2>& off, int64_t n) {
      const T* grow = gp + off[0];
      T* orow = o + off[1];
      if (inner_o == 0) {
        T acc = T(0);
        for (int64_t i = 0; i < n; ++i) acc += grow[i];
        orow[0] += acc;
      } else {
        for (int64_t i = 0; i < n; ++i) orow[i] += grow[i];
      }
    });
  });
}

}  // namespace qkv::kernels
