// qkv/kernels/bf16_step_weights.h - operands rounded to bf16 once for several training products:
// a step's weights (Bf16StepWeights) and a Linear's output gradient (Bf16RoundedOperand).
//
// Mixed-precision training keeps f32 master weights; its products round both f32 operands to bf16
// on every call (kernels/bf16.h). While a Bf16StepWeights is alive, a native bf16 product whose B
// operand is the whole of one of its weights instead runs against a copy of that weight converted
// once to bf16, in oneDNN's preferred (blocked) layout for the weight's role:
//   x @ W^T  (a Linear's forward, and a tied output projection): W (out, in) as the weight of x @ W^T;
//   dY @ W   (a Linear's backward for its input): W as B (K = out, N = in).
// A copy is made at the weight's first product in that role and kept until the scope ends, so a
// step converts each weight at most once per role however many micro-batches it runs, and the
// copies' storage is kept from step to step (refilled, not allocated again). The copies an earlier
// step used are refilled when the scope opens, all in one parallel region (a region per copy cost
// its threads' wake-up each, ~50 us under OMP_WAIT_POLICY=PASSIVE on a VM). On an AMD EPYC (Zen 5,
// AVX512_BF16; `bench_matmul bf16step`) the products against the blocked copy took 0.78-0.89x the
// time of rounding both operands per call into plain layouts, and a refill (once per step and role)
// cost 4-11% of one such product: GPT training in bf16 ran 2-16% faster (BENCHMARKS.md). Written
// with oneDNN's own reorder the refills cost more than the products saved at 1,024 rows.
//
// The product is the same sum of exact bf16 products in f32 as the per-call path (kernels/bf16.h's
// bound), in the blocked kernel's order. Only products with alpha 1, beta 0 and A not transposed
// (the Linear products above), under Bf16Products::native, take a copy; everything else (fp32_fma,
// a weight slice, any other shape) runs as before. Where oneDNN has no kernel for the blocked
// layout at a product's M (its layout may depend on M with AMX), the product falls back too.
//
// The weights must not change while the scope is alive: the trainer opens it after zero_grad and
// closes it before the optimizer step. One scope at a time per process.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "qkv/tensor/tensor.h"
#include "qkv/util/buffer.h"

namespace qkv::kernels {

class Bf16StepWeights {
 public:
  // params: the model's parameters; the 2-D contiguous f32 ones are taken (converted lazily).
  explicit Bf16StepWeights(const std::vector<Tensor>& params);
  ~Bf16StepWeights();
  Bf16StepWeights(const Bf16StepWeights&) = delete;
  Bf16StepWeights& operator=(const Bf16StepWeights&) = delete;
  int64_t copies_made() const;  // weight copies converted in this scope so far

  // Takes w, a 2-D contiguous f32 matrix made during the step from its weights (a concatenation
  // [W_q; W_k; W_v] that one product runs against), as one of the active scope's weights until the
  // scope ends, which keeps it alive; without an active scope, does nothing. It must not change
  // while the scope is alive. Its copies are converted at its first product in each role, as any
  // weight's. Rounded per call into a plain layout instead, a fused attention projection ran at 526
  // GFLOP/s in its forward and 690 for dX, against 778 for the blocked copies in the same step
  // (translation bench step, AMD EPYC Zen 5, AVX512_BF16, 2 threads).
  static void adopt(const Tensor& w);

  struct State;  // gemm's view (bf16_step_weights.cpp)

 private:
  State* state_;
};

// One bf16 copy of an f32 matrix for several products on the calling thread: while alive, a native
// bf16 product that would round the (rows, cols) matrix at p with row stride ld as one of its
// operands (gemm_bf16's A or B, either transpose; or x of gemm_bf16_packed) reads the copy instead.
// A Linear's backward rounds dY once for dX = dY W and dW = dY^T X rather than twice; in training, a
// Linear's forward rounds x once for x @ W^T and keeps the copy for its backward's dW = dY^T x. The
// matrix must not change while it is alive. Nested ones: the innermost that matches is read.
class Bf16RoundedOperand {
 public:
  Bf16RoundedOperand(const float* p, int64_t rows, int64_t cols, int64_t ld);
  // The same for a contiguous f32 x (R, N), whose column sums (kernels::column_sums' bits) are
  // written into *column_sums (N) by the same pass: a Linear's dY and its bias gradient.
  Bf16RoundedOperand(const Tensor& x, Tensor* column_sums);
  // For an f32 x (R, K) with unit column stride: rounded into a new copy (kept(): its R K bf16 values
  // as 2 R K bytes of a u8 tensor) when `kept` is undefined; otherwise `kept` is such a copy of x
  // made earlier (x unchanged since), live again.
  Bf16RoundedOperand(const Tensor& x, const Tensor& kept);
  ~Bf16RoundedOperand();
  Bf16RoundedOperand(const Bf16RoundedOperand&) = delete;
  Bf16RoundedOperand& operator=(const Bf16RoundedOperand&) = delete;
  int64_t uses() const { return uses_; }  // products that read the copy so far
  const Tensor& kept() const { return kept_; }  // the copy of the third constructor

  // The live copy of (p, rows, cols, ld) on this thread (a hit counts as a use), or null.
  static const uint16_t* lookup(const float* p, int64_t rows, int64_t cols, int64_t ld);

  // Room for a copy, lent by the thread's spare and grown without zero-filling (the rounding
  // writes every element; a vector's resize wrote zeros first: 0.7% of a bf16 translation step).
  struct Bits {
    std::unique_ptr<uint16_t, BufferDeleter> data;
    size_t capacity = 0;  // in values
  };

 private:
  void push();  // makes this the innermost live operand
  const float* p_;
  int64_t rows_, cols_, ld_, uses_ = 0;
  Bits bits_;  // the copy, unless it is kept_
  Tensor kept_;
  const uint16_t* data_ = nullptr;
  Bf16RoundedOperand* outer_ = nullptr;
};

// The GEMM front-end's hook: C (M, N), row stride ldc = A (M, K) @ op(B) (+ bias on every row) from a
// copy of B when a Bf16StepWeights is alive, B is the whole of one of its weights in a role above
// and the product qualifies; returns false, having written nothing, otherwise.
bool gemm_bf16_step_weight(bool transB, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                           int64_t ldb, float* C, int64_t ldc, const float* bias);

}  // namespace qkv::kernels
