// bf16 rounding (to nearest even, as torch) and the per-thread matmul precision setting.
#include <omp.h>

#include "qkv/kernels/bf16.h"
#include "qkv/util/error.h"

namespace qkv::kernels {
namespace {
thread_local MatmulPrecision t_precision = MatmulPrecision::fp32;
}

void round_to_bf16(const float* x, uint16_t* y, int64_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= (int64_t(1) << 18) && !omp_in_parallel())
  for (int64_t i = 0; i < n; ++i) y[i] = to_bf16(x[i]);
}

void round_to_bf16(const float* x, int64_t rows, int64_t cols, int64_t ld, uint16_t* y) {
  if (ld == cols) return round_to_bf16(x, y, rows * cols);
#pragma omp parallel for schedule(static) if (rows * cols >= (int64_t(1) << 18) && !omp_in_parallel())
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * ld;
    uint16_t* yr = y + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yr[c] = to_bf16(xr[c]);
  }
}

MatmulPrecision matmul_precision() { return t_precision; }

const char* precision_name(MatmulPrecision p) {
  switch (p) {
    case MatmulPrecision::bf16: return "bf16";
    case MatmulPrecision::int8: return "int8";
    case MatmulPrecision::fp32: break;
  }
  return "fp32";
}

MatmulPrecision parse_precision(const std::string& s) {
  if (s == "fp32") return MatmulPrecision::fp32;
  if (s == "bf16") return MatmulPrecision::bf16;
  if (s == "int8") return MatmulPrecision::int8;
  fail("precision", "expected fp32, bf16 or int8, got '", s, "'");
}

MatmulPrecisionScope::MatmulPrecisionScope(MatmulPrecision p) : saved_(t_precision) { t_precision = p; }
MatmulPrecisionScope::~MatmulPrecisionScope() { t_precision = saved_; }

}  // namespace qkv::kernels
