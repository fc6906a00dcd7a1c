// qkv/kernels/bf16.h - bf16 (bfloat16) matrix products: rounding, the precision setting the GEMM
// front-end (gemm.h) reads, and the bf16 GEMM entry over oneDNN's matmul primitive.
//
// bf16 GEMM: C (f32) = alpha * op(A) op(B) + beta * C with A and B rounded to bf16 (round to
// nearest, ties to even, as torch's .bfloat16()) and products accumulated in f32 by oneDNN.
// Only src/kernels/cpu/gemm_dnnl.cpp includes oneDNN; nothing above kernels/ sees it.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace qkv::kernels {

// f32 -> bf16 bits, round to nearest even, bit-identical to torch's tensor .bfloat16(): every NaN
// -> 0xFFFF (a quiet NaN; torch's vectorised conversion writes that, its scalar one 0x7FC0); +-inf
// stay inf; values that round past the largest bf16 become inf; subnormals round like the rest.
inline uint16_t to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0xFFFF;
  return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
inline float from_bf16(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
// y[i] = to_bf16(x[i]) for n values (vectorised; threads when n is large).
void round_to_bf16(const float* x, uint16_t* y, int64_t n);
// A (rows, cols) f32 matrix with leading dimension ld -> contiguous bf16 (rows, cols).
void round_to_bf16(const float* x, int64_t rows, int64_t cols, int64_t ld, uint16_t* y);

// The precision of f32 matrix products (gemm, batched_matmul, matmul_2d, linear):
//   fp32 - OpenBLAS sgemm (the default; results bit-identical to before bf16 existed);
//   bf16 - operands rounded to bf16, f32 accumulation (oneDNN), f32 results.
// A per-thread setting, read once by each front-end call on the calling thread (its worker
// threads follow it). Set it with a MatmulPrecisionScope.
enum class MatmulPrecision : uint8_t { fp32, bf16 };
MatmulPrecision matmul_precision();
const char* precision_name(MatmulPrecision p);     // "fp32" | "bf16"
MatmulPrecision parse_precision(const std::string& s);  // "fp32" | "bf16", else throws naming it

class MatmulPrecisionScope {
 public:
  explicit MatmulPrecisionScope(MatmulPrecision p);
  ~MatmulPrecisionScope();
  MatmulPrecisionScope(const MatmulPrecisionScope&) = delete;
  MatmulPrecisionScope& operator=(const MatmulPrecisionScope&) = delete;

 private:
  MatmulPrecision saved_;
};

// bf16 GEMM on operands already in bf16 (weights converted once and kept): row-major, op(X) = X^T
// when transX, as gemm() in gemm.h. Primitives are created once per (shape, layout, alpha, beta)
// and cached. Throws when the CPU (or oneDNN's ISA cap) has neither AMX nor AVX512_BF16.
void gemm_bf16(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A,
               int64_t lda, const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc);
// The same on f32 operands: A and B are rounded to bf16 first (into per-thread buffers).
void gemm_bf16(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// What oneDNN runs on this CPU (after ONEDNN_MAX_CPU_ISA's cap, read once per process).
struct DnnlCpuInfo {
  std::string cpu_model;  // /proc/cpuinfo "model name"
  std::string isa;        // oneDNN's effective ISA, e.g. "avx512_core_bf16", "avx512_core_amx"
  bool amx = false;          // AMX tiles (avx512_core_amx)
  bool avx512_bf16 = false;  // AVX512_BF16 instructions (avx512_core_bf16 or above)
  bool avx512 = false;       // AVX-512 (avx512_core or above)
  bool bf16_native() const { return amx || avx512_bf16; }
  std::string bf16_kernel() const;  // "AMX", "AVX512_BF16" or "none (...)"
};
const DnnlCpuInfo& dnnl_cpu_info();
// Primitives created by gemm_bf16 so far (tests use it to prove the cache is used).
int64_t gemm_bf16_primitives_created();

}  // namespace qkv::kernels
