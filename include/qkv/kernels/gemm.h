// qkv/kernels/gemm.h - the GEMM front-end every matmul-like op in qkv goes through (BLAS).
//
// Row-major throughout: C (M, N) = alpha * op(A) op(B) + beta * C, op(A) (M, K), op(B) (K, N).
// op(X) = X^T when transX: A is then stored (K, M) with leading dimension lda >= M.
// f32 -> cblas_sgemm, f64 -> cblas_dgemm (OpenBLAS, OpenMP build: GEMM shares our OpenMP pool and
// runs single-threaded when called inside a parallel region, so batched calls never oversubscribe).
// Large f32 products outside a parallel region go to oneDNN's f32 matmul instead where oneDNN runs
// AVX-512 and measured faster: B transposed (x @ W^T, a Linear's forward), or N <= 1024 (on AMD
// also K < 2048 when A is not transposed) (f32_gemm_backend below).
// Under a MatmulPrecisionScope(bf16) (kernels/bf16.h) the f32 products go to the bf16 backend
// (oneDNN) instead: operands rounded to bf16, f32 accumulation; the checks here stay the same.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "qkv/kernels/bf16.h"
#include "qkv/tensor/tensor.h"

namespace qkv::kernels {

void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
          const double* B, int64_t ldb, double beta, double* C, int64_t ldc);

// How a strided (R, C) matrix view maps onto BLAS: row-major as is (trans = false, ld = row
// stride), or the transpose of a row-major matrix (trans = true, ld = column stride).
// ok = false when neither holds (e.g. a stride-2 inner axis, a broadcast row): copy first.
struct BlasLayout {
  bool ok = false;
  bool trans = false;
  int64_t ld = 1;
};
BlasLayout blas_layout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride);

// Batched, broadcast matrix product with reduction over batch axes:
//   out[t] = sum over batch indices i that map onto t of  x[i] @ y[i]
// x (bx..., M, K) and y (by..., K, N) are arbitrary strided views (a transposed view such as
// x.mT goes to BLAS as a transpose flag, never copied); their batch axes broadcast to `batch`.
// out (tb..., M, N) must be contiguous, with tb broadcastable to `batch` (same rank or fewer
// axes); axes where tb is 1 and batch is not are summed. Products are accumulated in a fixed
// order (deterministic for a given thread count). Small matrices in a large batch run in
// parallel over the batch (one single-threaded GEMM per thread); large ones use BLAS threads.
void batched_matmul(const Tensor& x, const Tensor& y, const Shape& batch, Tensor& out);

// out (M, N) = x (M, K) @ y (K, N) + beta * out for strided 2-D views x, y (transposed views
// go to BLAS as flags); out contiguous.
void matmul_2d(const Tensor& x, const Tensor& y, Tensor& out, double beta = 0.0);

// out (R, N) = x (R, K) @ w^T + bias: w (N, K) as stored by nn.Linear, bias (N) or undefined.
// The bias is fused: in oneDNN's epilogue when the product goes there (the f32 rule below), else
// out starts as the bias rows and the GEMM runs with beta = 1 (gemm.cpp's gemm_impl decides).
void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out);

// A Linear's weight packed once for many skinny products against it (incremental decoding: a
// few dozen rows per step, the same weights every step). BLAS re-packs the weight on every call;
// the fp32 forms here do not. Two layouts (PackLayout), chosen by the owner of the weight:
//   panels: W^T copied into panels of 32 output columns, (K, 32) each, zero-padded, read by an
//           AVX-512 8 x 32 micro-kernel (compute-friendly for tens of rows; a second copy of the
//           weight, kept with it).
//   rows:   no copy: the weights' own (N_i, K) rows, read in place. Each output is a dot product
//           of an x row with a weight row, weight rows streamed contiguously, each read once per
//           product whatever M is (an 8-row block stays in L1 while every x row uses it). For
//           batch-1 generation, which is memory-bound, and for inference-only models, which
//           then hold every weight once.
// The layers above hold a PackedLinear in a PackedWeights (ops/packed.h), which packs again
// whenever a weight changed (a rows pack only re-reads its pointers and bias: no copy).
//
// Packed for precision bf16, the weight is instead converted once to bf16 and x is rounded to bf16
// per product (f32 accumulation, f32 out). In the rows layout the copy is the rows themselves in
// bf16 (row-major (N, K), stacked weights one after another: half the bytes of f32 to stream at
// batch 1), read by the rows kernel on pairs of bf16 values (vdpbf16ps), so a row's output is again
// the same alone or in a batch. In the panels layout the form follows the process's bf16 products
// (bf16_products(), bf16.h) when the weight is packed:
//   native:   oneDNN's preferred layout (Bf16Weight, bf16.h), and oneDNN multiplies;
//   fp32_fma: qkv's panels in bf16 (half the bytes of fp32's), read by the fp32 micro-kernel with
//             each panel row widened to f32 in registers (a shift and a mask), on x rounded to bf16:
//             bit for bit the fp32 panels' product of the rounded x and the bf16 weight. A CPU
//             whose bf16 instructions do not outrun its fp32 FMA (an Intel Xeon without AMX)
//             runs decoding's tens of rows at about fp32's speed, not oneDNN bf16's 0.6-0.8x.
// From bf16_fma_min_rows rows under fp32_fma, the original weight (widened, if held in bf16) and
// x are rounded per product and multiplied by the fp32 GEMM instead.
// Packed for precision int8, a weight large enough to pay (int8_pays, kernels/int8.h) is quantized
// once per output channel (Int8Weight) and x per row at each product; a weight that pays only at
// a batch (int8_pays_from_rows) gets both that and the fp32 panels, and products of at least
// int8_small_weight_min_rows() rows use the int8 form; any other is packed as for fp32.
struct Int8Weight;
enum class PackLayout { panels, rows };
const char* pack_layout_name(PackLayout l);  // "panels" | "rows"

struct PackedLinear {
  // The originals, (N, K) and (N) or undefined (the f64 / recorded fallback path). A pack of
  // several stacked weights leaves `weight` undefined when it would be a copy that no product
  // reads (a rows pack; a bf16 or int8 form without fp32 panels): see `rows`. Weights held in
  // bf16 (nn::Module::hold_weights_in_bf16) pack for precision bf16 only; their bias stays f32.
  Tensor weight, bias;
  Tensor panels;           // (ceil(N / 32), K, 32) f32; panels layout only
  // Rows layout: the weights (N_i, K), f32 or held in bf16, contiguous, stacked on N (fp32 reads
  // them in place).
  // A bf16 or int8 form of a stack without `weight`: the same originals, for the fallbacks.
  std::vector<Tensor> rows;
  // Rows layout, bf16: the stacked weights as bf16 bits, (N, K); weights held in bf16 that lie one
  // after another in their storage are read there (an alias), not copied.
  std::shared_ptr<const uint16_t> rows_bf16;
  std::shared_ptr<const Bf16Weight> bf16;  // panels layout, bf16 products native, else null
  // Panels layout, bf16 products fp32_fma: (ceil(N / 32), K, 32) bf16 panels, row k of a panel as 16
  // dwords (dword c: column c in its low half, column c + 16 in its high half), else null.
  std::shared_ptr<const uint16_t> bf16_panels;
  // Precision int8, int8_pays or int8_pays_from_rows (f32 only), else null. Panels layout: oneDNN's
  // blocked form; rows layout: s8 rows (kernels/int8.h, the rows form).
  std::shared_ptr<const Int8Weight> int8;
  // Weights held in int8 whose `int8` is oneDNN's blocked copy: the held rows themselves too (no
  // copy), which batches below int8_rows_max_batch() rows multiply on qkv's kernel (the same bits).
  std::shared_ptr<const Int8Weight> int8_rows;
  bool int8_from_batch = false;  // int8 only from int8_small_weight_min_rows() rows (int8_pays_from_rows)
  Tensor dense_bias;    // bias, contiguous
  Tensor padded_bias;   // (ceil(N / 32) * 32) when N is not a multiple of 32 (panels)
  int64_t N = 0, K = 0;
  MatmulPrecision precision = MatmulPrecision::fp32;
  PackLayout layout = PackLayout::panels;
  bool defined() const { return weight.defined() || !rows.empty(); }
  // The (N, K) original: `weight`, or else the stacked `rows` joined (a copy, made per call: only
  // fallbacks read it, rare or amortised over a batch). Weights held in bf16 come back widened to
  // f32 (exact; a copy per call).
  Tensor original_weight() const;
};
PackedLinear pack_linear(const Tensor& w, const Tensor& bias, MatmulPrecision precision = MatmulPrecision::fp32);
// The rows layout over weights (N_i, K) stacked on axis 0 (e.g. [W_q; W_k; W_v]), each f32 and
// contiguous; bias (sum N_i) or undefined. fp32: read in place, nothing copied but the bias.
// bf16: converted once (to_bf16) into one (sum N_i, K) copy, or, for weights held in bf16, read in
// place when they lie one after another in one storage. int8: quantized once into one (sum N_i, K)
// s8 copy (the f32 weights stay the fallback of a batch below int8_small_weight_min_rows() when
// the stack pays only from rows). Weights held in int8 (i8 tensors): their rows read in place, and
// with held_int8_blocked also reordered once into oneDNN's blocked form for batches of
// int8_rows_max_batch() rows or more (the panels layout's int8 form).
PackedLinear pack_linear_rows(const std::vector<Tensor>& weights, const Tensor& bias,
                              MatmulPrecision precision = MatmulPrecision::fp32, bool held_int8_blocked = false);
// out (M, N) = x (M, K) @ w^T + bias; x rows unit-stride (row stride free), out contiguous.
// fp32: each output element is one dot product whose order of additions is fixed by K alone (the
// panels: k-ordered; the rows: 16 k-ordered lane sums, then a fixed tree), so results depend
// neither on the thread count nor on M (a row's output is the same alone or in a batch).
// bf16 rows: the same, on x rounded to bf16 and the bf16 weights, 16 lanes of pairs (vdpbf16ps;
// without AVX512_BF16 in the build, f32 FMAs in the fp32 order; qkv's own kernel, so oneDNN's
// ONEDNN_MAX_CPU_ISA cap does not apply to it, as to gemm_bf16_tile's). bf16 panels: oneDNN's matmul
// against the converted weight, or the widened bf16 panels (or fp32_fma from bf16_fma_min_rows
// rows, as above); int8:
// kernels/int8.h's scheme.
void packed_linear(const Tensor& x, const PackedLinear& p, Tensor& out);

// A rows product of one x row (batch-1 decoding) splits the weight rows between threads, and each
// thread reads its share as this many streams at once, a row of each of its equal parts at a
// time: 2 on AMD family 19h (Zen 4; Zen 3 not measured), 4 on other AMD (Zen 5), 8 on other
// CPUs (the fastest measured on Zen 4, Zen 5 and an Intel Xeon with AMX; see
// src/kernels/cpu/gemm_rows.cpp), or QKV_ROW_STREAMS=1|2|4|8. The count never changes a bit of
// the output. set_rows_streams_per_thread (1, 2, 4, 8, or 0 for the CPU's count) is for benches
// and tests.
int rows_streams_per_thread();
void set_rows_streams_per_thread(int streams);

// out (N) = sum over the rows of x (R, N) (a Linear's bias gradient); x, out contiguous. Sums in
// row order, in x's dtype (like the GEMM against a row of ones it replaces); threads own column
// tiles, so results do not depend on the thread count.
void column_sums(const Tensor& x, Tensor& out);
// column_sums of an f32 x, and x rounded to bf16 (to_bf16, row-major (R, N)) into `rounded` in the
// same pass over x: a Linear's bias gradient and its bf16 dY for the two products (bf16_step_weights.h).
void column_sums_and_bf16(const Tensor& x, Tensor& out, uint16_t* rounded);

// The f32 backend for large products: "onednn" (oneDNN's f32 matmul, one primitive per shape,
// cached) or "openblas". The default is onednn on CPUs where oneDNN runs AVX-512, else openblas;
// QKV_F32_GEMM=openblas|onednn in the environment sets it for the process. Under onednn a product
// goes to oneDNN when B is transposed or N <= f32_onednn_max_plain_n: on the Intel Xeon of
// BENCHMARKS.md ("fp32 products through oneDNN", `bench_matmul f32backends`, M = 1024, N and K in
// 256..3072) oneDNN was 1.00-1.17x OpenBLAS with B transposed and 0.98-1.19x with a plain B up to
// N = 1024, but with a plain B it reads B's rows in place and fell to 0.4-0.6x at N = 3072 (and at
// 1536 and 2304 for large K). On an AMD CPU a plain-B product with A not transposed (NN: a
// Linear's input gradient dY @ W) also needs K <= f32_onednn_amd_nn_max_k: on an AMD EPYC Zen 5,
// cold operands as in a training step, oneDNN took 1.2-1.3x OpenBLAS's time at K 2304-4096 (BERT's
// dY @ W_qkv and dY @ W_1 at N 768), 1.05-1.2x at K 8192 (GPT's vocabulary), 1.0-1.2x at K 2048;
// the Xeon was level or faster with oneDNN there. Products below f32_onednn_min_macs multiply-adds
// (oneDNN lost at 32 x 256 x 256), f64 products, alpha == 0 and calls inside a parallel region
// always run in OpenBLAS. Both sum in f32 in an order fixed by the shape and the thread count
// (deterministic run to run); they differ from each other in the last bits.
const char* f32_gemm_backend();
void set_f32_gemm_backend(const char* name);  // "onednn" | "openblas"; throws on anything else
constexpr int64_t f32_onednn_min_macs = int64_t(1) << 23;  // M * N * K
constexpr int64_t f32_onednn_max_plain_n = 1024;            // N, when B is not transposed
constexpr int64_t f32_onednn_amd_nn_max_k = 2047;           // K, when neither is transposed, on AMD
// True when oneDNN runs AVX-512 here (its f32 brgemm kernels); without it "onednn" is refused.
bool gemm_f32_onednn_available();
// The backend itself: C = alpha op(A) op(B) + beta C (+ bias, a (N) vector added to every row in
// the kernel's epilogue, when not null), with the front-end's checks already done.
void gemm_f32_onednn(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                     int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                     const float* bias = nullptr);
// Primitives gemm_f32_onednn made so far (tests use it to prove which backend ran).
int64_t gemm_f32_onednn_primitives_created();

// Operands batched_matmul had to copy because their layout was not BLAS-compatible (a counter
// over the process lifetime; tests use it to prove that transposed views are not copied).
int64_t gemm_operand_copies();

// The BLAS kernel family in use (OpenBLAS core name, e.g. "SkylakeX"). OpenBLAS 0.3.21 does not
// recognise recent Xeons (family 6 model 207 here) and falls back to "Prescott" (SSE3), ~4x slower
// than its AVX-512 kernels: run with OPENBLAS_CORETYPE=SkylakeX (it is read once, when the library
// loads, so the process cannot change it for itself). See BENCHMARKS.md.
const char* blas_core();
// True when the CPU has AVX-512 but BLAS runs its Prescott (SSE3) kernels (see blas_core).
bool blas_core_is_degraded();

}  // namespace qkv::kernels
