// qkv/kernels/softmax.h - fused row softmax / log-softmax over the last axis (f32, f64), and the
// vectorisable exp they (and the fused cross-entropy) use.
//
// x is contiguous, viewed as (rows, C). `mask` is undefined or a view with x's shape (stride 0 on
// broadcast axes): bool/u8 -> true = masked out (treated as -inf), f32/f64 -> added to the logits.
// A fully masked row (every logit -inf) gives softmax 0 and log_softmax -inf, and zero gradient.
// One pass per row computes max, exp-sum and the normalised output while the row is in L1; OpenMP
// splits rows among threads.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

#include "qkv/tensor/tensor.h"

namespace qkv::kernels {

// vexp's constants, also used where the same exp is written in intrinsics (GELU's AVX-512 kernel).
namespace exp_f32 {
constexpr float kLo = -87.33654475f, kHi = 88.72283906f;  // exp underflows below FLT_MIN / overflows
constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer (no floor call)
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = 2.12194440e-4f;  // ln2 = kLn2Hi - kLn2Lo; n * kLn2Hi is exact
constexpr float kPoly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                            4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};  // Horner, highest first
}  // namespace exp_f32

// exp(x) for f32 in a form the compiler vectorises (no libm call): Cody-Waite range reduction
// x = n ln2 + r (n rounded by the 1.5 * 2^23 trick), a degree-6 minimax polynomial for exp(r) (Cephes expf coefficients), then 2^n by
// building the exponent bits. Max error ~2 ulp; exp(x) = 0 for x < -87.33 (below FLT_MIN), +inf
// above 88.72.
inline float vexp(float x) {
  using namespace exp_f32;
  float xc = x < kLo ? kLo : (x > kHi ? kHi : x);
  float t = xc * kLog2e + kRound;
  float n = t - kRound;                                   // round(x / ln2)
  int32_t ni = std::bit_cast<int32_t>(t) - 0x4B400000;    // the same integer, from the bits
  float r = xc - n * kLn2Hi;  // ln2 split in two parts: exact product with the high part
  r = r + n * kLn2Lo;
  float p = kPoly[0];
  for (int i = 1; i < 6; ++i) p = p * r + kPoly[i];
  float e = p * r * r + r + 1.0f;
  float y = e * std::bit_cast<float>((ni + 127) << 23);
  y = x < kLo ? 0.0f : y;
  return x > kHi ? INFINITY : y;
}
inline double vexp(double x) { return std::exp(x); }  // f64 serves gradient checks: exact libm

// out(rows, C) = softmax or log_softmax of (x [+ mask]) per row.
void softmax_forward(const Tensor& x, const Tensor& mask, bool log, Tensor& out);
// gx from y = the forward output and gy: softmax gx = y (gy - <gy, y>); log_softmax
// gx = gy - exp(y) sum(gy). With a bool mask, masked positions get 0; fully masked rows get 0.
void softmax_backward(const Tensor& y, const Tensor& gy, const Tensor& mask, bool log, Tensor& gx);

}  // namespace qkv::kernels
