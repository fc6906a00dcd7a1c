#include "qkv/ops/loss.h"

#include <vector>

#include "qkv/autograd/node.h"
#include "qkv/kernels/loss.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/reduce.h"

namespace qkv {
namespace {

// Validates logits (..., C) against targets (...); returns the targets as i64 and the count of
// non-ignored ones.
std::vector<int64_t> checked_targets(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                     const char* op, int64_t& count) {
  check_floating(logits, op, "logits");
  check_defined(targets, op, "targets");
  QKV_CHECK(targets.dtype() == DType::i64 || targets.dtype() == DType::i32, op,
            "targets must be class indices (i64 or i32), got ", targets.str());
  QKV_CHECK(logits.ndim() >= 1 && logits.shape().back() > 0, op, "logits must be (..., C) with C > 0, got ",
            logits.str());
  Shape lead = logits.shape();
  Shape expect;
  for (int d = 0; d + 1 < lead.ndim(); ++d) expect.push_back(lead[d]);
  QKV_CHECK(targets.shape() == expect, op, "targets must have shape ", expect.str(), " for logits ", logits.str(),
            ", got ", targets.str());
  std::vector<int64_t> t;
  if (targets.dtype() == DType::i64) {
    t = targets.to_vector<int64_t>();
  } else {
    std::vector<int32_t> t32 = targets.to_vector<int32_t>();
    t.assign(t32.begin(), t32.end());
  }
  int64_t C = logits.shape().back();
  count = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == ignore_index) continue;
    QKV_CHECK(t[i] >= 0 && t[i] < C, op, "target ", t[i], " at flat position ", i, " is out of range for C = ", C,
              " classes (ignore_index = ", ignore_index, ")");
    ++count;
  }
  return t;
}

// Reduces per-element losses (targets' shape) and returns the factor that scales gy per element.
Tensor reduce_rows(const Tensor& rows, Reduction reduction, int64_t count, double& factor) {
  if (reduction == Reduction::none) {
    factor = 1.0;
    return rows;
  }
  Tensor total = Tensor::empty({}, rows.dtype());
  double acc = 0;
  for (double v : rows.to_vector<double>()) acc += v;  // sequential: deterministic
  factor = reduction == Reduction::sum ? 1.0 : (count ? 1.0 / double(count) : 0.0);
  total.fill(acc * factor);
  return total;
}

struct CrossEntropyBackward : Node {
  Tensor logits, lse;  // (N, C), (N)
  std::vector<int64_t> targets;
  int64_t ignore_index = -100;
  double smoothing = 0, factor = 1;
  const char* name() const override { return "CrossEntropyBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    // loss_i = (1-s)(lse_i - x_it) + s(lse_i - mean_j x_ij)  ->  dx_ij = p_ij - s/C - (1-s)[j == t_i]
    Tensor gx = Tensor::empty(logits.shape(), logits.dtype());
    kernels::cross_entropy_backward(logits, targets.data(), lse, ignore_index, smoothing, g[0].contiguous(),
                                    factor, gx);
    return {gx, Tensor()};
  }
  void release_saved() override {
    logits = lse = Tensor();
    targets.clear();
  }
};

struct NllBackward : Node {
  std::vector<int64_t> targets;
  int64_t ignore_index = -100;
  double factor = 1;
  const char* name() const override { return "NllLossBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    // loss_i = -logp[i, t_i]  ->  dlogp[i, t_i] = -gy_i * factor
    Tensor gy = g[0].contiguous();
    Tensor gx = Tensor::zeros(input_shapes[0], gy.dtype());
    kernels::nll_backward(targets.data(), ignore_index, gy, factor, gx);
    return {gx, Tensor()};
  }
};

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double label_smoothing,
                     Reduction reduction) {
  int64_t count = 0;
  std::vector<int64_t> t = checked_targets(logits, targets, ignore_index, "cross_entropy", count);
  QKV_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, "cross_entropy",
            "label_smoothing must be in [0, 1], got ", label_smoothing);
  Tensor xc = logits.contiguous();
  Tensor rows = Tensor::empty(targets.shape(), logits.dtype());
  Tensor lse = Tensor::empty(targets.shape(), logits.dtype());
  kernels::cross_entropy_forward(xc, t.data(), ignore_index, label_smoothing, rows, lse);
  double factor = 1;
  Tensor out = reduce_rows(rows, reduction, count, factor);
  if (any_requires_grad({logits})) {
    auto node = make_node<CrossEntropyBackward>({logits, targets});
    node->logits = xc.detach();
    node->lse = lse;
    node->targets = std::move(t);
    node->ignore_index = ignore_index;
    node->smoothing = label_smoothing;
    node->factor = factor;
    set_history(out, node);
  }
  return out;
}

Tensor nll_loss(const Tensor& logp, const Tensor& targets, int64_t ignore_index, Reduction reduction) {
  int64_t count = 0;
  std::vector<int64_t> t = checked_targets(logp, targets, ignore_index, "nll_loss", count);
  Tensor lc = logp.contiguous();
  Tensor rows = Tensor::empty(targets.shape(), logp.dtype());
  kernels::nll_forward(lc, t.data(), ignore_index, rows);
  double factor = 1;
  Tensor out = reduce_rows(rows, reduction, count, factor);
  if (any_requires_grad({logp})) {
    auto node = make_node<NllBackward>({logp, targets});
    node->targets = std::move(t);
    node->ignore_index = ignore_index;
    node->factor = factor;
    set_history(out, node);
  }
  return out;
}

Tensor mse_loss(const Tensor& a, const Tensor& b, Reduction reduction) {
  check_floating(a, "mse_loss", "a");
  check_floating(b, "mse_loss", "b");
  QKV_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype(), "mse_loss",
            "a and b must have the same shape and dtype, got ", a.str(), " and ", b.str());
  Tensor sq = square(sub(a, b));  // recorded: the gradient 2 (a - b) comes from the elementwise ops
  if (reduction == Reduction::none) return sq;
  return reduction == Reduction::sum ? sum(sq) : mean(sq);
}

}  // namespace qkv
