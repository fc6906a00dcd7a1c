#include "qkv/ops/loss.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "qkv/autograd/node.h"
#include "qkv/kernels/bf16.h"
#include "qkv/kernels/bf16_step_weights.h"
#include "qkv/kernels/elementwise.h"
#include "qkv/kernels/gemm.h"
#include "qkv/kernels/loss.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/reduce.h"
#include "qkv/ops/shape.h"

namespace qkv {
namespace {

// Validates targets (...) against logits (..., C) of shape `logits` (described as `what`); returns
// the targets as i64 and the count of non-ignored ones.
std::vector<int64_t> checked_targets(const Shape& logits, const std::string& what, const Tensor& targets,
                                     int64_t ignore_index, const char* op, int64_t& count) {
  check_defined(targets, op, "targets");
  QKV_CHECK(targets.dtype() == DType::i64 || targets.dtype() == DType::i32, op,
            "targets must be class indices (i64 or i32), got ", targets.str());
  QKV_CHECK(logits.ndim() >= 1 && logits.back() > 0, op, "logits must be (..., C) with C > 0, got ", what);
  Shape expect;
  for (int d = 0; d + 1 < logits.ndim(); ++d) expect.push_back(logits[d]);
  QKV_CHECK(targets.shape() == expect, op, "targets must have shape ", expect.str(), " for logits ", what, ", got ",
            targets.str());
  std::vector<int64_t> t;
  if (targets.dtype() == DType::i64) {
    t = targets.to_vector<int64_t>();
  } else {
    std::vector<int32_t> t32 = targets.to_vector<int32_t>();
    t.assign(t32.begin(), t32.end());
  }
  int64_t C = logits.back();
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
  Tensor logits, stats;  // (N, C), (N, 2): each row's max and log sum exp(x - max)
  std::vector<int64_t> targets;
  int64_t ignore_index = -100;
  double smoothing = 0, factor = 1;
  const char* name() const override { return "CrossEntropyBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    // loss_i = (1-s)(lse_i - x_it) + s(lse_i - mean_j x_ij)  ->  dx_ij = p_ij - s/C - (1-s)[j == t_i]
    Tensor gx = Tensor::empty(logits.shape(), logits.dtype());
    kernels::cross_entropy_backward(logits, targets.data(), stats, ignore_index, smoothing, g[0].contiguous(),
                                    factor, gx);
    return {gx, Tensor()};
  }
  void release_saved() override {
    logits = stats = Tensor();
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

// linear_cross_entropy's backward: the forward computed the gradients at gy = 1 chunk by chunk
// (the logits existed only there); the upstream scalar scales them here.
struct LinearCrossEntropyBackward : Node {
  Tensor gx, gw, gb;  // (R, D) reshaped to x's shape below, (V, D), (V); undefined when not wanted
  bool spent = false;
  const char* name() const override { return "LinearCrossEntropyBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    QKV_CHECK(!spent, "linear_cross_entropy",
              "its backward runs once: the forward computed the gradients (retain_graph is not supported)");
    spent = true;
    const double s = g[0].item();
    std::vector<Tensor> out = {gx.defined() ? reshape(gx, input_shapes[0]) : Tensor(), gw, gb, Tensor()};
    for (Tensor& t : out)
      if (t.defined() && s != 1.0) kernels::scale_inplace(t, s);  // the node's own tensors, given away
    release_saved();
    return out;
  }
  void release_saved() override { gx = gw = gb = Tensor(); }
};

// Rows per chunk: about 2^23 logits (32 MiB in f32), so that a chunk's logits stay in the
// last-level cache from the product that writes them to the two that read their gradient.
int64_t chunk_rows_for(int64_t R, int64_t V, int64_t asked) {
  const int64_t all = std::max<int64_t>(R, 1);
  return asked > 0 ? std::min(asked, all) : std::clamp<int64_t>((int64_t(1) << 23) / V, 1, all);
}

// Rows [r0, r0 + n) of a contiguous (R, C) matrix, as a view.
Tensor row_block(const Tensor& m, int64_t r0, int64_t n) {
  const int64_t C = m.ndim() == 2 ? m.size(1) : 1;
  return m.ndim() == 2 ? m.as_strided({n, C}, {C, 1}, m.offset() + r0 * C) : m.as_strided({n}, {1}, m.offset() + r0);
}

}  // namespace

Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& targets,
                            int64_t ignore_index, double label_smoothing, Reduction reduction, int64_t chunk_rows) {
  const char* op = "linear_cross_entropy";
  check_floating(x, op, "x");
  check_floating(weight, op, "weight");
  QKV_CHECK(weight.ndim() == 2 && weight.size(0) > 0, op, "weight must be (classes, in) with classes > 0, got ",
            weight.str());
  QKV_CHECK(x.ndim() >= 1 && x.size(-1) == weight.size(1), op, "x ", x.str(), " does not end in the weight's ",
            weight.size(1), " in_features (weight ", weight.str(), ")");
  QKV_CHECK(x.dtype() == weight.dtype(), op, "dtypes differ: x ", x.str(), ", weight ", weight.str());
  if (bias.defined())
    QKV_CHECK(bias.dtype() == weight.dtype() && bias.ndim() == 1 && bias.size(0) == weight.size(0), op, "bias must be (",
              weight.size(0), ") ", dtype_name(weight.dtype()), ", got ", bias.str());
  QKV_CHECK(reduction != Reduction::none, op,
            "reduction must be sum or mean (per-row losses: cross_entropy(linear(x, weight, bias), ...))");
  QKV_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, op, "label_smoothing must be in [0, 1], got ",
            label_smoothing);
  QKV_CHECK(chunk_rows >= 0, op, "chunk_rows must be >= 0 (0: chosen from the classes), got ", chunk_rows);
  const int64_t D = weight.size(1), V = weight.size(0);
  std::vector<int64_t> logits_shape = x.shape().vec();  // (..., V)
  logits_shape.back() = V;
  int64_t count = 0;
  std::vector<int64_t> t = checked_targets(Shape(logits_shape), "(x " + x.str() + " times weight^T)", targets,
                                           ignore_index, op, count);
  const int64_t R = targets.numel();
  const DType dt = x.dtype();
  Tensor x2 = reshape(x.detach(), {R, D}).contiguous();  // (R, D)
  Tensor rows = Tensor::empty({R}, dt), stats = Tensor::empty({R, 2}, dt);
  const double factor = reduction == Reduction::sum ? 1.0 : (count ? 1.0 / double(count) : 0.0);

  std::shared_ptr<LinearCrossEntropyBackward> node;
  if (any_requires_grad({x, weight, bias})) node = make_node<LinearCrossEntropyBackward>({x, weight, bias, targets});
  const bool want_gx = node && node->next[0].valid(), want_gw = node && node->next[1].valid();
  const bool want_gb = node && bias.defined() && node->next[2].valid();
  Tensor gx = want_gx ? Tensor::empty({R, D}, dt) : Tensor();
  Tensor gw = want_gw ? (R ? Tensor::empty({V, D}, dt) : Tensor::zeros({V, D}, dt)) : Tensor();  // no rows: dW = 0
  Tensor gb = want_gb ? Tensor::zeros({V}, dt) : Tensor(), part = want_gb ? Tensor::empty({V}, dt) : Tensor();
  const int64_t C = chunk_rows_for(R, V, chunk_rows);
  Tensor logits = Tensor::empty({std::min(C, R), V}, dt);  // one chunk's logits, then their gradient
  for (int64_t r0 = 0; r0 < R; r0 += C) {
    const int64_t n = std::min(C, R - r0);
    const Tensor xc = row_block(x2, r0, n);
    Tensor L = row_block(logits, 0, n), rc = row_block(rows, r0, n), lc = row_block(stats, r0, n);
    kernels::linear(xc, weight, bias, L);  // (n, V)
    if (!node) {
      kernels::cross_entropy_forward(L, t.data() + r0, ignore_index, label_smoothing, rc, lc);
      continue;
    }
    // the loss rows, and dLoss/dlogits at gy = 1 over the logits in place
    kernels::cross_entropy_forward_backward(L, t.data() + r0, ignore_index, label_smoothing, factor, rc, lc);
    // bf16 (native): dlogits rounded once for both products, in the same pass as the bias gradient's
    // column sums when there is one (each product rounded it on its own, and the sums read it again).
    std::optional<kernels::Bf16RoundedOperand> L16;
    bool summed = false;
    if (want_gx && want_gw && dt == DType::f32 && kernels::native_bf16_products()) {
      if (want_gb) L16.emplace(L, &part), summed = true;
      else L16.emplace(L.data<float>(), n, V, V);
    }
    if (want_gx) {
      Tensor gxc = row_block(gx, r0, n);
      kernels::matmul_2d(L, weight.detach(), gxc);  // dx = dlogits W   (n, D)
    }
    if (want_gw) {  // dW += dlogits^T x   (V, D); the transpose a view that BLAS takes as a flag
      const Tensor Lt = L.as_strided({V, n}, {1, V}, L.offset());
      kernels::matmul_2d(Lt, xc, gw, r0 == 0 ? 0.0 : 1.0);
    }
    if (want_gb) {
      if (!summed) kernels::column_sums(L, part);
      kernels::add_inplace(gb, part);
    }
  }
  double unused = 1;
  Tensor out = reduce_rows(reshape(rows, targets.shape()), reduction, count, unused);
  if (node) {
    node->gx = gx, node->gw = gw, node->gb = gb;
    set_history(out, node);
  }
  return out;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double label_smoothing,
                     Reduction reduction) {
  int64_t count = 0;
  check_floating(logits, "cross_entropy", "logits");
  std::vector<int64_t> t = checked_targets(logits.shape(), logits.str(), targets, ignore_index, "cross_entropy", count);
  QKV_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, "cross_entropy",
            "label_smoothing must be in [0, 1], got ", label_smoothing);
  Tensor xc = logits.contiguous();
  Tensor rows = Tensor::empty(targets.shape(), logits.dtype());
  Tensor stats = Tensor::empty({targets.numel(), 2}, logits.dtype());
  kernels::cross_entropy_forward(xc, t.data(), ignore_index, label_smoothing, rows, stats);
  double factor = 1;
  Tensor out = reduce_rows(rows, reduction, count, factor);
  if (any_requires_grad({logits})) {
    auto node = make_node<CrossEntropyBackward>({logits, targets});
    node->logits = node->save(xc);
    node->stats = stats;
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
  check_floating(logp, "nll_loss", "logp");
  std::vector<int64_t> t = checked_targets(logp.shape(), logp.str(), targets, ignore_index, "nll_loss", count);
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
