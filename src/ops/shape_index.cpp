// Indexing ops: gather, index_select, where, masked_fill, each with its backward.
#include <algorithm>

#include "axis.h"
#include "qkv/autograd/node.h"
#include "qkv/kernels/index.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/shape.h"

namespace qkv {
namespace {

using detail::axis_of;

void check_index_dtype(const Tensor& index, const char* op) {
  check_defined(index, op, "index");
  QKV_CHECK(index.dtype() == DType::i64 || index.dtype() == DType::i32, op, "index must be i64 or i32, got ",
            index.str());
}

// Every index value must lie in [0, bound).
void check_index_range(const Tensor& index, int64_t bound, int axis, const Tensor& x, const char* op) {
  std::vector<int64_t> v = index.to_vector<int64_t>();
  for (size_t i = 0; i < v.size(); ++i)
    QKV_CHECK(v[i] >= 0 && v[i] < bound, op, "index ", v[i], " (at flat position ", i, ") is out of range [0, ",
              bound, ") for axis ", axis, " of x ", x.shape().str());
}

void check_mask(const Tensor& m, const char* op, const char* arg) {
  check_defined(m, op, arg);
  QKV_CHECK(m.dtype() == DType::boolean || m.dtype() == DType::u8, op, "argument '", arg,
            "' must be bool or u8, got ", m.str());
}

struct GatherBackward : Node {  // y = gather(x, axis, index): dx = scatter_add(0, axis, index, dy)
  int axis = 0;
  Tensor index;
  const char* name() const override { return "GatherBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    Tensor gx = Tensor::zeros(input_shapes[0], input_dtypes[0]);
    kernels::scatter_add(gx, axis, index, g[0]);
    return {gx};
  }
  void release_saved() override { index = Tensor(); }
};

struct IndexSelectBackward : Node {  // y = index_select(x, axis, index): dx = index_add(0, .., dy)
  int axis = 0;
  Tensor index;
  const char* name() const override { return "IndexSelectBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    Tensor gx = Tensor::zeros(input_shapes[0], input_dtypes[0]);
    kernels::index_add(gx, axis, index, g[0]);
    return {gx};
  }
  void release_saved() override { index = Tensor(); }
};

// out = cond ? a : b with the kernel (no recording).
Tensor select(const Tensor& cond, const Tensor& a, const Tensor& b, const Shape& shape) {
  Tensor out = Tensor::empty(shape, a.dtype());
  kernels::where(cond, a, b, out);
  return out;
}

struct WhereBackward : Node {  // y = cond ? a : b: da = cond ? dy : 0, db = cond ? 0 : dy (summed to shape)
  Tensor cond;
  const char* name() const override { return "WhereBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    const Tensor& gy = g[0];
    Tensor zero = Tensor::zeros(Shape{}, gy.dtype());
    Tensor ga, gb;
    if (next[0].valid()) ga = sum_to(select(cond, gy, zero, gy.shape()), input_shapes[0]);
    if (next[1].valid()) gb = sum_to(select(cond, zero, gy, gy.shape()), input_shapes[1]);
    return {ga, gb};
  }
  void release_saved() override { cond = Tensor(); }
};

struct MaskedFillBackward : Node {  // y = mask ? value : x: dx = mask ? 0 : dy
  Tensor mask;
  const char* name() const override { return "MaskedFillBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    return {select(mask, Tensor::zeros(Shape{}, g[0].dtype()), g[0], g[0].shape())};
  }
  void release_saved() override { mask = Tensor(); }
};

}  // namespace

Tensor gather(const Tensor& x, int axis, const Tensor& index) {
  check_defined(x, "gather", "x");
  check_index_dtype(index, "gather");
  int a = axis_of(x, axis, "gather");
  QKV_CHECK(index.ndim() == x.ndim(), "gather", "index ", index.shape().str(), " must have as many axes as x ",
            x.shape().str());
  for (int d = 0; d < x.ndim(); ++d)
    QKV_CHECK(d == a || index.shape()[d] <= x.shape()[d], "gather", "index ", index.shape().str(),
              " is larger than x ", x.shape().str(), " on axis ", d, " (only axis ", axis, " may differ)");
  if (x.ndim() == 0) {  // 0-d: the only valid index is 0
    return reshape(gather(reshape(x, {1}), 0, reshape(index, {1})), Shape{});
  }
  check_index_range(index, x.shape()[a], axis, x, "gather");
  Tensor idx = index.contiguous();
  Tensor out = Tensor::empty(index.shape(), x.dtype());
  kernels::gather(x, a, idx, out);
  if (any_requires_grad({x})) {
    auto node = make_node<GatherBackward>({x});
    node->axis = a;
    node->index = node->save(idx);
    set_history(out, node);
  }
  return out;
}

Tensor index_select(const Tensor& x, int axis, const Tensor& index) {
  check_defined(x, "index_select", "x");
  check_index_dtype(index, "index_select");
  QKV_CHECK(x.ndim() > 0, "index_select", "x must have at least one axis, got ", x.str());
  QKV_CHECK(index.ndim() <= 1, "index_select", "index must be 1-D, got ", index.shape().str());
  int a = axis_of(x, axis, "index_select");
  check_index_range(index, x.shape()[a], axis, x, "index_select");
  Tensor idx = reshape(index.detach(), {-1}).contiguous();
  Shape shape = x.shape();
  shape[a] = idx.numel();
  Tensor out = Tensor::empty(shape, x.dtype());
  kernels::index_select(x, a, idx, out);
  if (any_requires_grad({x})) {
    auto node = make_node<IndexSelectBackward>({x});
    node->axis = a;
    node->index = node->save(idx);
    set_history(out, node);
  }
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_mask(cond, "where", "cond");
  check_defined(a, "where", "a");
  check_defined(b, "where", "b");
  QKV_CHECK(a.dtype() == b.dtype(), "where", "a and b must have one dtype, got ", a.str(), " and ", b.str());
  Shape shape = Shape::broadcast(Shape::broadcast(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out = select(cond, a, b, shape);
  if (any_requires_grad({a, b})) {
    auto node = make_node<WhereBackward>({a, b});
    node->cond = node->save(cond);
    set_history(out, node);
  }
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_defined(x, "masked_fill", "x");
  check_mask(mask, "masked_fill", "mask");
  Shape shape = Shape::broadcast(x.shape(), mask.shape(), "masked_fill");
  QKV_CHECK(shape == x.shape(), "masked_fill", "mask ", mask.shape().str(), " does not broadcast to x ",
            x.shape().str());
  Tensor out = select(mask, Tensor::full(Shape{}, value, x.dtype()), x, shape);
  if (any_requires_grad({x})) {
    auto node = make_node<MaskedFillBackward>({x});
    node->mask = node->save(mask);
    set_history(out, node);
  }
  return out;
}

}  // namespace qkv
