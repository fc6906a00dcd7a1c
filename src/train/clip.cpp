// Global-norm gradient clipping (qkv/train/clip.h), torch.nn.utils.clip_grad_norm_ semantics.
#include "qkv/train/clip.h"

#include <algorithm>
#include <cmath>

#include "qkv/kernels/elementwise.h"
#include "qkv/kernels/optim.h"

namespace qkv {

double grad_norm(const std::vector<Tensor>& params) {
  double sq = 0;  // sum over tensors in order: deterministic
  for (const Tensor& p : params) {
    check_defined(p, "grad_norm", "parameter");
    Tensor g = p.grad();
    if (g.defined()) {
      check_floating(g, "grad_norm", "grad");
      sq += kernels::sum_squares_deterministic(g);
    }
  }
  return std::sqrt(sq);
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, bool error_if_nonfinite) {
  QKV_CHECK(max_norm > 0, "clip_grad_norm", "expected max_norm > 0, got ", max_norm);
  double total = grad_norm(params);
  QKV_CHECK(!error_if_nonfinite || std::isfinite(total), "clip_grad_norm",
            "the total gradient norm is non-finite (", total, "), so it cannot be clipped");
  scale_grads_to_norm(params, max_norm, total);
  return total;
}

void scale_grads_to_norm(const std::vector<Tensor>& params, double max_norm, double total) {
  QKV_CHECK(max_norm > 0, "clip_grad_norm", "expected max_norm > 0, got ", max_norm);
  double coef = max_norm / (total + 1e-6);
  if (coef >= 1.0) return;  // torch multiplies by clamp(coef, max=1) = 1: a no-op
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (g.is_contiguous()) {
      kernels::scale_inplace(g, coef);
    } else {
      Tensor c = g.contiguous();
      kernels::scale_inplace(c, coef);
      g.copy_from(c);
    }
  }
}

}  // namespace qkv
