// qkv/kernels/optim.h - fused optimizer updates and a deterministic sum of squares (f32, f64).
//
// Each update reads p, g and the state once and writes p and the state once, one pass per
// parameter, OpenMP above kParallelGrain. Every element is independent, so the result is the
// same for any thread count. The float arithmetic follows torch 1.13's _single_tensor_* steps
// operation by operation (scalars are rounded to the tensor dtype where torch rounds them), so
// results agree with torch.optim to a few ulp. Tensors must be contiguous and alike (the
// train/ front-ends check); no autograd.
#pragma once
#include <cstdint>
#include <vector>

#include "qkv/tensor/tensor.h"

namespace qkv::kernels {

struct AdamStep {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  int64_t step = 1;        // this update's number for this parameter, from 1 (bias correction)
  bool decoupled = false;  // AdamW: p *= 1 - lr * wd; Adam: g += wd * p (L2)
  bool amsgrad = false;
};
// p, g, m (exp_avg), v (exp_avg_sq): same shape and dtype. vmax (max_exp_avg_sq) only if amsgrad.
void adam_update(Tensor& p, const Tensor& g, Tensor& m, Tensor& v, Tensor* vmax, const AdamStep& h);
// The arguments of one adam_update.
struct AdamUpdate {
  Tensor* p;
  const Tensor* g;
  Tensor *m, *v, *vmax;
  AdamStep h;
};
// Every parameter's update in one parallel region, with the results of adam_update on each in turn
// (the same chunks per parameter). A region costs its start: ~50 us on a VM whose idle threads
// sleep (OMP_WAIT_POLICY=PASSIVE), paid once per step rather than once per weight matrix.
void adam_update_all(const std::vector<AdamUpdate>& updates);

struct SgdStep {
  double lr = 1e-2, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
  bool first = false;  // the momentum buffer is new: buf = d_p (torch: no dampening on step 1)
};
// buf (momentum buffer) is used only if momentum != 0.
void sgd_update(Tensor& p, const Tensor& g, Tensor& buf, const SgdStep& h);

// Sum of squares accumulated in double over fixed blocks of kSumBlock elements, the block sums
// added in order: bit-identical for every thread count (unlike an OpenMP reduction).
constexpr int64_t kSumBlock = 4096;
double sum_squares_deterministic(const Tensor& x);

}  // namespace qkv::kernels
