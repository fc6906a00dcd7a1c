// qkv/kernels/bf16.h - bf16 (bfloat16) matrix products: rounding, the precision setting the GEMM
// front-end (gemm.h) reads, and the bf16 GEMM entry over oneDNN's matmul primitive.
//
// bf16 GEMM: C (f32) = alpha * op(A) op(B) + beta * C with A and B rounded to bf16 (round to
// nearest, ties to even, as torch's .bfloat16()) and products accumulated in f32 by oneDNN.
// Only src/kernels/cpu/gemm_dnnl.cpp includes oneDNN; nothing above kernels/ sees it.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

namespace qkv::kernels {

// f32 -> bf16 bits, round to nearest even, bit-identical to torch's tensor .bfloat16(): every NaN
// -> 0xFFFF (a quiet NaN; torch's vectorised conversion writes that, its scalar one 0x7FC0); +-inf
// stay inf; values that round past the largest bf16 become inf; subnormals round like the rest.
inline uint16_t to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return uint16_t((u & 0x7FFFFFFFu) > 0x7F800000u ? 0xFFFFu : rounded);  // a select: loops vectorise
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
//   bf16 - operands rounded to bf16, f32 accumulation (oneDNN), f32 results;
//   int8 - inference only: the products against cached packed weights (ops/packed.h) that are
//          large enough to pay (kernels/int8.h: int8_pays) run in int8; every other product
//          (activations against activations, small weights, anything recorded for backward)
//          stays fp32.
// A per-thread setting, read once by each front-end call on the calling thread (its worker
// threads follow it). Set it with a MatmulPrecisionScope. OpenMP workers do not inherit it: a
// kernel that calls gemm() inside its own parallel region must read it on the calling thread and
// apply it on every worker (the fused attention kernels: bf16 tiles through gemm_bf16_tile, fp32
// ones through gemm() under an fp32 scope), or results would depend on which thread ran what.
enum class MatmulPrecision : uint8_t { fp32, bf16, int8 };
MatmulPrecision matmul_precision();
const char* precision_name(MatmulPrecision p);     // "fp32" | "bf16" | "int8"
MatmulPrecision parse_precision(const std::string& s);  // "fp32" | "bf16" | "int8", else throws naming it

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

// How a bf16 product of f32 operands (mixed-precision training, and any bf16 product that is not
// against a converted weight) is computed. Both round A and B to bf16 and accumulate in f32:
//   native   - oneDNN's bf16 matmul on the operands converted to bf16 (AMX tiles, or AVX512_BF16's
//              vdpbf16ps);
//   fp32_fma - the operands rounded to bf16 values but kept in f32, multiplied by the fp32 GEMM
//              (oneDNN's f32 matmul or OpenBLAS). A product of two bf16 values is exact in f32, so
//              this sums the same exact products in f32: the same result within the accumulation
//              bound, in another order. It is the faster on a CPU whose bf16 instructions do not
//              outrun its fp32 FMA: an Intel Xeon without AMX measured native bf16 at 0.35-0.7x
//              fp32 (BENCHMARKS.md).
// The process's choice: QKV_BF16_PRODUCTS=native|fp32_fma, else (unset or "auto") native unless
// measured_precision_speed() (kernels/precision_speed.h) timed it slower than fp32. Resolved at the
// first bf16 product or check_precision_supported(bf16) (which commands call at start, outside any
// parallel region), then kept; set_bf16_products overrides it (a resumed run restores its own).
// Products against converted weights (packed_linear in gemm.h: inference) stay native below
// bf16_fma_min_rows rows, where they are memory-bound and bf16 halves the bytes read; from there on
// fp32_fma, if chosen, takes them too, rounding the original f32 weight per call (`bench_matmul
// bf16fma`, Intel Xeon without AMX: native/fp32_fma 0.22-0.37x at 8 rows, 0.97-1.15x at 128,
// 1.14-1.37x at 256, 1.37-1.60x at 2048).
enum class Bf16Products : uint8_t { native, fp32_fma };
constexpr int64_t bf16_fma_min_rows = 256;
Bf16Products bf16_products();
void set_bf16_products(Bf16Products p);
const char* bf16_products_name(Bf16Products p);              // "native" | "fp32_fma"
Bf16Products parse_bf16_products(const std::string& s, const char* who);  // throws naming `who`
// True when this thread's products run as native bf16 (matmul_precision() bf16, bf16_products()
// native): mixed-precision training's, which round an operand once for several products.
bool native_bf16_products();
// Sets bf16_products() for its lifetime, then restores the choice it found (benches, tests).
class Bf16ProductsScope {
 public:
  explicit Bf16ProductsScope(Bf16Products p) : saved_(bf16_products()) { set_bf16_products(p); }
  ~Bf16ProductsScope() { set_bf16_products(saved_); }
  Bf16ProductsScope(const Bf16ProductsScope&) = delete;
  Bf16ProductsScope& operator=(const Bf16ProductsScope&) = delete;

 private:
  Bf16Products saved_;
};

// C = alpha op(A) op(B) + beta C on f32 operands rounded to bf16 (into per-thread buffers), by the
// process's bf16_products(); gemm_bf16_rounded names the way explicitly (the speed probe, tests).
void gemm_bf16(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
void gemm_bf16_rounded(Bf16Products how, bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                       const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
// A small bf16 product on the calling thread alone (no worker threads, no oneDNN primitive): the
// attention kernels' tiles (kernels/attention.h), a few hundred thousand multiply-adds each, where
// oneDNN's per-call cost would outweigh what bf16 saves. C = alpha op(A) op(B) + beta C (beta 0 or
// 1), A and B rounded by to_bf16 into per-thread buffers, f32 accumulation: qkv's own AMX or
// AVX512_BF16 kernel (bf16_tile_kernel(); both read bf16 subnormals as zero, as oneDNN's do), else
// the rounded values through the fp32 GEMM (the fp32_fma way).
void gemm_bf16_tile(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                    int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
// The kernel gemm_bf16_tile runs: under bf16_products() native, AMX tiles where the build, the CPU
// (within oneDNN's ISA cap, ONEDNN_MAX_CPU_ISA) and the OS allow them, else qkv's vdpbf16ps kernel
// when built with AVX512_BF16; otherwise (and under fp32_fma) the fp32 GEMM on rounded values.
// All three sum the same exact products in f32, in different orders.
enum class Bf16TileKernel : uint8_t { amx, avx512_bf16, fp32_fma };
Bf16TileKernel bf16_tile_kernel();
bool bf16_tile_kernel_available(Bf16TileKernel k);
const char* bf16_tile_kernel_name(Bf16TileKernel k);  // "AMX" | "AVX512_BF16" | "fp32_fma"
// gemm_bf16_tile through a named kernel (tests, benches); throws if it is not available.
void gemm_bf16_tile_with(Bf16TileKernel kernel, bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                         const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
// True when gemm_bf16_tile runs bf16 instructions (AMX or vdpbf16ps), not the fp32 GEMM.
bool bf16_tile_native();
// y = the f32 values of to_bf16(x) for a (rows, cols) matrix with leading dimension ld, into
// contiguous y (fp32_fma's operands).
void round_to_bf16_values(const float* x, int64_t rows, int64_t cols, int64_t ld, float* y);

// A weight W (N, K) converted once to bf16 for many products x @ W^T (inference: a loaded model's
// Linear layers, every call and every decoding step against the same weights). Opaque: the
// layout is oneDNN's (defined in gemm_dnnl.cpp).
//   blocked - the layout oneDNN's matmul prefers for this CPU (format_tag::any, reordered once);
//   plain   - W as stored, row-major bf16 (the comparison bench_matmul measures; see BENCHMARKS.md).
// blocked is what models use: on the decode shapes it was 1.1-1.7x faster at 32 rows and 1.5-2.9x
// at 1-8 rows than plain (AMD EPYC, AVX512_BF16, one thread).
struct Bf16Weight;
enum class Bf16WeightLayout : uint8_t { blocked, plain };
// w (N, K) f32, row stride ldw. Throws when the CPU has neither AMX nor AVX512_BF16.
std::shared_ptr<const Bf16Weight> pack_bf16_weight(const float* w, int64_t N, int64_t K, int64_t ldw,
                                                   Bf16WeightLayout layout = Bf16WeightLayout::blocked);
// The same from w (N, K) already in bf16 (contiguous bf16 bits: a weight held in bf16).
std::shared_ptr<const Bf16Weight> pack_bf16_weight_bits(const uint16_t* w, int64_t N, int64_t K,
                                                        Bf16WeightLayout layout = Bf16WeightLayout::blocked);
// A bf16 copy to be refilled (a training step's weights, kernels/bf16_step_weights.h), in the
// blocked layout oneDNN picks for products of `rows` rows, storage only (zeroed): kn false for a
// weight W (N, K) of x @ W^T; kn true for B (K, N) of x @ B (a Linear's dX = dY @ W: W (out, in)
// is B with K = out, N = in). refill_bf16_weight converts new f32 values (row stride ld) into it in
// one pass, rounding by to_bf16: straight into the blocks for the layout AVX512_BF16 uses
// ("BA16a64b2a"; 1.2-1.7x the speed of oneDNN's reorder on the GPT bench's weights, AMD EPYC Zen 5,
// `bench_matmul bf16step`); any other layout by oneDNN's reorder
// (which rounds to nearest even too, but makes f32 subnormals zero, as the bf16 products read bf16
// subnormals anyway, and keeps NaN payloads).
std::shared_ptr<Bf16Weight> make_bf16_weight(int64_t N, int64_t K, bool kn, int64_t rows);
void refill_bf16_weight(Bf16Weight& w, const float* src, int64_t ld);
// out (M, N), row stride ldo = x (M, K) @ W^T + bias: x f32 with row stride ldx is rounded to bf16
// (per call, into a per-thread buffer), products accumulate in f32; bias (N) f32 or null. Throws
// where oneDNN has no kernel for the weight's layout at this M; try_gemm_bf16_packed returns false
// there instead, having written nothing.
void gemm_bf16_packed(int64_t M, const float* x, int64_t ldx, const Bf16Weight& w, const float* bias, float* out,
                      int64_t ldo);
bool try_gemm_bf16_packed(int64_t M, const float* x, int64_t ldx, const Bf16Weight& w, const float* bias, float* out,
                          int64_t ldo);
// Weights converted to bf16 so far, by pack_bf16_weight or as a rows pack (pack_linear_rows in
// gemm.h): tests count them (converted once, not per call).
int64_t bf16_weights_packed();
// Bytes the converted weight occupies (oneDNN's blocked layout pads N and K to its blocks), and
// where (tests compare layouts byte for byte).
size_t bf16_weight_bytes(const Bf16Weight& w);
const void* bf16_weight_data(const Bf16Weight& w);

// Throws, naming `who`, when `p` is bf16 and the CPU (or oneDNN's ISA cap) has neither AMX nor
// AVX512_BF16: bf16 would be emulated, slower than fp32, so it is refused rather than run slowly.
// Likewise int8 without AVX512-VNNI or AMX (kernels/int8.h: its sums would saturate).
void check_precision_supported(MatmulPrecision p, const char* who);
// The same for a task's call, named "<task> (precision <p>)", e.g. "tag (precision bf16)".
void check_task_precision(MatmulPrecision p, const char* task);

// What oneDNN runs on this CPU (after ONEDNN_MAX_CPU_ISA's cap, read once per process).
struct DnnlCpuInfo {
  std::string cpu_model;  // /proc/cpuinfo "model name"
  std::string vendor;     // /proc/cpuinfo "vendor_id": "GenuineIntel", "AuthenticAMD", ...
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
