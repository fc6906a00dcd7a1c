#include "qkv/ops/reduce.h"

#include <algorithm>
#include <limits>

#include "qkv/autograd/node.h"
#include "qkv/kernels/elementwise.h"
#include "qkv/kernels/reduce.h"

namespace qkv {
namespace {

std::string axes_str(const std::vector<int>& axes) {
  std::string s = "[";
  for (size_t i = 0; i < axes.size(); ++i) s += (i ? ", " : "") + std::to_string(axes[i]);
  return s + "]";
}

// Normalised, sorted axes; all axes when `axes` is empty. Throws on duplicates / out of range.
std::vector<int> resolve_axes(const Tensor& x, const std::vector<int>& axes, const char* op) {
  int nd = x.ndim();
  std::vector<int> out;
  if (axes.empty()) {
    for (int d = 0; d < nd; ++d) out.push_back(d);
    return out;
  }
  for (int a : axes) {
    QKV_CHECK(a >= -nd && a < nd, op, "axis ", a, " out of range for ", x.str(), " (axes ", axes_str(axes), ")");
    out.push_back(a < 0 ? a + nd : a);
  }
  std::sort(out.begin(), out.end());
  QKV_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), op, "repeated axis in ", axes_str(axes),
            " for ", x.str());
  return out;
}

Shape keep_shape(const Shape& s, const std::vector<int>& axes) {
  Shape k = s;
  for (int a : axes) k[a] = 1;
  return k;
}

Shape squeeze_shape(const Shape& s, const std::vector<int>& axes) {
  Shape out;
  for (int d = 0, j = 0; d < s.ndim(); ++d) {
    if (j < int(axes.size()) && axes[size_t(j)] == d) { ++j; continue; }
    out.push_back(s[d]);
  }
  return out;
}

int64_t prod(const Shape& s, int lo, int hi) {
  int64_t p = 1;
  for (int d = lo; d < hi; ++d) p *= s[d];
  return p;
}

// Sums contiguous x over sorted `axes`, runs of adjacent axes one block at a time (last run first),
// and multiplies by `scale` at the end. Returns the keepdim-shaped result.
Tensor sum_axes(const Tensor& x, const std::vector<int>& axes, double scale) {
  Tensor cur = x.contiguous();
  Shape shape = cur.shape();
  if (axes.empty()) {  // nothing reduced: a scaled copy
    Tensor out = Tensor::empty(shape, x.dtype());
    kernels::affine(cur, scale, 0.0, out);
    return out;
  }
  int j = int(axes.size()) - 1;
  while (j >= 0) {
    int b = axes[size_t(j)] + 1, a = axes[size_t(j)];
    while (j > 0 && axes[size_t(j - 1)] == a - 1) { --j; --a; }
    --j;
    bool last = j < 0;
    int64_t outer = prod(shape, 0, a), R = prod(shape, a, b), inner = prod(shape, b, shape.ndim());
    for (int d = a; d < b; ++d) shape[d] = 1;
    Tensor next = Tensor::empty(shape, x.dtype());
    kernels::sum_block(cur, outer, R, inner, last ? scale : 1.0, next);
    cur = next;
  }
  return cur;
}

// y = scale * sum_axes(x): dx = scale * broadcast(gy) over the reduced axes.
struct SumBackward : Node {
  std::vector<int> axes;
  double scale = 1;
  const char* label = "SumBackward";
  const char* name() const override { return label; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    const Shape& xs = input_shapes[0];
    Shape ks = keep_shape(xs, axes);
    Tensor gk = g[0].contiguous();
    Shape bst = Shape::contiguous_strides(ks);  // gy in keepdim shape, stride 0 on reduced axes
    for (int a : axes) bst[a] = 0;
    Tensor view = gk.as_strided(xs, bst, gk.offset());
    Tensor gx = Tensor::empty(xs, gk.dtype());
    gx.copy_from(view);
    if (scale != 1.0) kernels::scale_inplace(gx, scale);
    return {gx};
  }
};

Tensor reduce_sum(const Tensor& x, const std::vector<int>& axes_in, bool keepdim, bool is_mean, const char* op) {
  check_floating(x, op, "x");
  std::vector<int> axes = resolve_axes(x, axes_in, op);
  int64_t count = 1;
  for (int a : axes) count *= x.shape()[a];
  double scale = is_mean ? (count ? 1.0 / double(count) : std::numeric_limits<double>::quiet_NaN()) : 1.0;
  Tensor out = sum_axes(x, axes, scale);
  Shape os = keepdim ? keep_shape(x.shape(), axes) : squeeze_shape(x.shape(), axes);
  out = out.as_strided(os, Shape::contiguous_strides(os), out.offset());
  if (any_requires_grad({x})) {
    auto node = make_node<SumBackward>({x});
    node->axes = axes;
    node->scale = scale;
    node->label = is_mean ? "MeanBackward" : "SumBackward";
    set_history(out, node);
  }
  return out;
}

struct MaxBackward : Node {  // values = x[first argmax along axis]
  Tensor indices;            // (outer, inner) i64
  int64_t outer = 1, R = 1, inner = 1;
  const char* name() const override { return "MaxBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    Tensor gx = Tensor::empty(input_shapes[0], g[0].dtype());
    kernels::max_block_backward(g[0].contiguous(), indices, outer, R, inner, gx);
    return {gx};
  }
  void release_saved() override { indices = Tensor(); }
};

struct MaxResult {
  Tensor values, indices;
  int64_t outer, R, inner;
};

MaxResult max_impl(const Tensor& x, int axis_in, bool keepdim, bool want_values, const char* op) {
  check_floating(x, op, "x");
  int nd = x.ndim();
  QKV_CHECK(axis_in >= -nd && axis_in < nd, op, "axis ", axis_in, " out of range for ", x.str());
  int axis = axis_in < 0 ? axis_in + nd : axis_in;
  QKV_CHECK(x.shape()[axis] > 0, op, "cannot reduce over axis ", axis_in, " of extent 0 in ", x.str());
  Tensor xc = x.contiguous();
  MaxResult r{Tensor(), Tensor(), prod(x.shape(), 0, axis), x.shape()[axis], prod(x.shape(), axis + 1, nd)};
  Shape os = keepdim ? keep_shape(x.shape(), {axis}) : squeeze_shape(x.shape(), {axis});
  r.indices = Tensor::empty(os, DType::i64);
  if (want_values) r.values = Tensor::empty(os, x.dtype());
  kernels::max_block(xc, r.outer, r.R, r.inner, want_values ? &r.values : nullptr, r.indices);
  return r;
}

}  // namespace

Tensor sum(const Tensor& x, std::vector<int> axes, bool keepdim) { return reduce_sum(x, axes, keepdim, false, "sum"); }
Tensor mean(const Tensor& x, std::vector<int> axes, bool keepdim) { return reduce_sum(x, axes, keepdim, true, "mean"); }

Tensor max(const Tensor& x, int axis, bool keepdim) {
  MaxResult r = max_impl(x, axis, keepdim, true, "max");
  if (any_requires_grad({x})) {
    auto node = make_node<MaxBackward>({x});
    node->indices = r.indices;
    node->outer = r.outer;
    node->R = r.R;
    node->inner = r.inner;
    set_history(r.values, node);
  }
  return r.values;
}

Tensor argmax(const Tensor& x, int axis, bool keepdim) { return max_impl(x, axis, keepdim, false, "argmax").indices; }

}  // namespace qkv
