// View ops (reshape, permute, transpose, (un)squeeze, slice, expand, contiguous) and
// concat / split / chunk, each with its backward.
#include <algorithm>

#include "axis.h"
#include "qkv/autograd/node.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/shape.h"

namespace qkv {
namespace {

using detail::axis_of;

std::string vec_str(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string vec_str(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + ")";
}

// Strides that let `shape` view a tensor of (old, ost) without copying, if any exist: the old
// axes are cut into runs that are contiguous among themselves, and each run must be covered by
// consecutive new axes of the same element count.
bool view_strides(const Shape& old, const Shape& ost, const Shape& shape, Shape& out) {
  out = Shape::contiguous_strides(shape);
  if (old.numel() == 0 || old.ndim() == 0) return true;
  int nd = shape.ndim(), vd = nd - 1;
  int64_t base = ost[old.ndim() - 1], run_numel = 1, view_numel = 1;
  for (int d = old.ndim() - 1; d >= 0; --d) {
    run_numel *= old[d];
    bool run_ends = d == 0 || (old[d - 1] != 1 && ost[d - 1] != run_numel * base);
    if (!run_ends) continue;
    while (vd >= 0 && (view_numel < run_numel || shape[vd] == 1)) {
      out[vd] = view_numel * base;
      view_numel *= shape[vd];
      --vd;
    }
    if (view_numel != run_numel) return false;
    if (d > 0) {
      base = ost[d - 1];
      run_numel = view_numel = 1;
    }
  }
  return vd == -1;
}

Tensor view_of(const Tensor& x, const Shape& shape, const Shape& strides, int64_t offset) {
  return x.as_strided(shape, strides, offset);
}

// Backward of every op whose gradient is the incoming one reshaped to the input's shape.
struct ReshapeBackward : Node {
  const char* label = "ReshapeBackward";
  const char* name() const override { return label; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override { return {reshape(g[0], input_shapes[0])}; }
};

Tensor reshape_recorded(const Tensor& x, const Shape& shape, const char* label) {
  Shape st;
  Tensor out = view_strides(x.shape(), x.strides(), shape, st) ? view_of(x, shape, st, x.offset())
                                                              : view_of(x.clone(), shape, Shape::contiguous_strides(shape), 0);
  if (any_requires_grad({x})) {
    auto node = make_node<ReshapeBackward>({x});
    node->label = label;
    set_history(out, node);
  }
  return out;
}

struct PermuteBackward : Node {
  std::vector<int> inverse;
  const char* name() const override { return "PermuteBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override { return {permute(g[0], inverse)}; }
};

struct SliceBackward : Node {  // y = x[.., start:end:step, ..]
  int axis = 0;
  int64_t start = 0, step = 1;
  const char* name() const override { return "SliceBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    Tensor gx = Tensor::zeros(input_shapes[0], input_dtypes[0]);
    Shape st = gx.strides();
    int64_t off = start * st[axis];
    st[axis] *= step;
    Tensor region = gx.as_strided(g[0].shape(), st, off);
    region.copy_from(g[0]);
    return {gx};
  }
};

struct ExpandBackward : Node {  // y = broadcast(x): dx = sum over the broadcast axes
  const char* name() const override { return "ExpandBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override { return {sum_to(g[0], input_shapes[0])}; }
};

struct ContiguousBackward : Node {
  const char* name() const override { return "ContiguousBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override { return {g[0]}; }
};

struct ConcatBackward : Node {  // y = cat(xs, axis): dx_i = the slice of dy that x_i filled
  int axis = 0;
  const char* name() const override { return "ConcatBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    std::vector<Tensor> out(next.size());
    int64_t pos = 0;
    for (size_t i = 0; i < next.size(); ++i) {
      int64_t n = input_shapes[i][axis];
      if (next[i].valid()) out[i] = slice(g[0], axis, pos, pos + n);
      pos += n;
    }
    return out;
  }
};

struct SplitBackward : Node {  // ys = split(x): dx = the pieces' gradients side by side (0 if none)
  int axis = 0;
  std::vector<int64_t> sizes;
  // The pieces' gradients as one tensor of x's shape without a copy, when they already lie side
  // by side in one buffer, as x's row-major layout puts them (the attention backward leaves the
  // q, k, v gradients so: sdpa.cpp's empty_grads); else undefined.
  Tensor pieces_side_by_side(const std::vector<Tensor>& g) const {
    const Shape& shape = input_shapes[0];
    const Shape strides = Shape::contiguous_strides(shape);
    int64_t pos = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      Shape piece = shape;
      piece[axis] = sizes[i];
      if (g[i].storage() != g[0].storage() || g[i].dtype() != input_dtypes[0] || !(g[i].shape() == piece) ||
          !(g[i].strides() == strides) || g[i].offset() != g[0].offset() + pos * strides[axis])
        return Tensor();
      pos += sizes[i];
    }
    return g[0].as_strided(shape, strides, g[0].offset());
  }
  const char* name() const override { return "SplitBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    bool all = true;  // every piece has a gradient: each element of gx is written once
    for (size_t i = 0; i < sizes.size(); ++i) all = all && g[i].defined();
    if (all) {
      if (Tensor whole = pieces_side_by_side(g); whole.defined()) return {whole};
    }
    Tensor gx = all ? Tensor::empty(input_shapes[0], input_dtypes[0]) : Tensor::zeros(input_shapes[0], input_dtypes[0]);
    int64_t pos = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (g[i].defined()) slice(gx, axis, pos, pos + sizes[i]).copy_from(g[i]);
      pos += sizes[i];
    }
    return {gx};
  }
};

}  // namespace

Tensor reshape(const Tensor& x, const std::vector<int64_t>& sizes) {
  check_defined(x, "reshape", "x");
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      QKV_CHECK(infer < 0, "reshape", "only one extent may be -1, got ", vec_str(sizes));
      infer = int(i);
    } else {
      QKV_CHECK(sizes[i] >= 0, "reshape", "invalid extent ", sizes[i], " in ", vec_str(sizes));
      known *= sizes[i];
    }
  }
  std::vector<int64_t> full = sizes;
  int64_t n = x.numel();
  if (infer >= 0) {
    QKV_CHECK(known != 0 && n % known == 0, "reshape", "cannot reshape ", x.shape().str(), " (", n,
              " elements) into ", vec_str(sizes));
    full[size_t(infer)] = n / known;
  }
  Shape shape(full);
  QKV_CHECK(shape.numel() == n, "reshape", "cannot reshape ", x.shape().str(), " (", n, " elements) into ",
            vec_str(sizes), " (", shape.numel(), " elements)");
  return reshape_recorded(x, shape, "ReshapeBackward");
}

Tensor reshape(const Tensor& x, std::initializer_list<int64_t> shape) {
  return reshape(x, std::vector<int64_t>(shape));
}
Tensor reshape(const Tensor& x, const Shape& shape) { return reshape(x, shape.vec()); }

Tensor flatten(const Tensor& x, int start, int end) {
  check_defined(x, "flatten", "x");
  if (x.ndim() == 0) return reshape(x, {1});
  int s = axis_of(x, start, "flatten"), e = axis_of(x, end, "flatten");
  QKV_CHECK(s <= e, "flatten", "start axis ", start, " comes after end axis ", end, " for ", x.shape().str());
  std::vector<int64_t> sizes;
  for (int d = 0; d < s; ++d) sizes.push_back(x.shape()[d]);
  int64_t merged = 1;
  for (int d = s; d <= e; ++d) merged *= x.shape()[d];
  sizes.push_back(merged);
  for (int d = e + 1; d < x.ndim(); ++d) sizes.push_back(x.shape()[d]);
  return reshape_recorded(x, Shape(sizes), "FlattenBackward");
}

Tensor permute(const Tensor& x, const std::vector<int>& dims) {
  check_defined(x, "permute", "x");
  int nd = x.ndim();
  QKV_CHECK(int(dims.size()) == nd, "permute", "dims ", vec_str(dims), " are not a permutation of the ", nd,
            " axes of ", x.shape().str());
  std::vector<int> inverse(static_cast<size_t>(nd), -1);
  Shape shape = x.shape(), strides = x.strides();
  for (int i = 0; i < nd; ++i) {
    int d = dims[size_t(i)] < 0 ? dims[size_t(i)] + nd : dims[size_t(i)];
    QKV_CHECK(d >= 0 && d < nd && inverse[size_t(d)] < 0, "permute", "dims ", vec_str(dims),
              " are not a permutation of the ", nd, " axes of ", x.shape().str());
    inverse[size_t(d)] = i;
    shape[i] = x.shape()[d];
    strides[i] = x.strides()[d];
  }
  Tensor out = view_of(x, shape, strides, x.offset());
  if (any_requires_grad({x})) {
    auto node = make_node<PermuteBackward>({x});
    node->inverse = inverse;
    set_history(out, node);
  }
  return out;
}

Tensor transpose(const Tensor& x, int a, int b) {
  check_defined(x, "transpose", "x");
  int nd = x.ndim();
  std::vector<int> dims(static_cast<size_t>(nd));
  for (int i = 0; i < nd; ++i) dims[size_t(i)] = i;
  if (nd == 0) {  // like torch: a 0-d tensor accepts axes 0 / -1 and stays as it is
    axis_of(x, a, "transpose");
    axis_of(x, b, "transpose");
    return permute(x, dims);
  }
  std::swap(dims[size_t(axis_of(x, a, "transpose"))], dims[size_t(axis_of(x, b, "transpose"))]);
  return permute(x, dims);
}

Tensor unsqueeze(const Tensor& x, int axis) {
  check_defined(x, "unsqueeze", "x");
  int nd = x.ndim();
  int a = axis < 0 ? axis + nd + 1 : axis;
  QKV_CHECK(a >= 0 && a <= nd, "unsqueeze", "axis ", axis, " out of range for ", x.shape().str(), " (valid: ",
            -nd - 1, " to ", nd, ")");
  std::vector<int64_t> sizes = x.shape().vec();
  sizes.insert(sizes.begin() + a, 1);
  return reshape_recorded(x, Shape(sizes), "UnsqueezeBackward");
}

Tensor squeeze(const Tensor& x, int axis) {
  check_defined(x, "squeeze", "x");
  int a = axis_of(x, axis, "squeeze");
  if (x.ndim() == 0 || x.shape()[a] != 1) return x;  // torch: squeezing a non-unit axis is a no-op
  std::vector<int64_t> sizes = x.shape().vec();
  sizes.erase(sizes.begin() + a);
  return reshape_recorded(x, Shape(sizes), "SqueezeBackward");
}

Tensor slice(const Tensor& x, int axis, int64_t start, int64_t end, int64_t step) {
  check_defined(x, "slice", "x");
  QKV_CHECK(x.ndim() > 0, "slice", "cannot slice a 0-d tensor");
  int a = axis_of(x, axis, "slice");
  QKV_CHECK(step >= 1, "slice", "step must be >= 1, got ", step);
  int64_t n = x.shape()[a];
  auto clampi = [n](int64_t v) {
    if (v < 0) v += n;
    return std::clamp<int64_t>(v, 0, n);
  };
  int64_t s = clampi(start), e = end == kSliceEnd ? n : clampi(end);
  const int64_t len = e > s ? (e - s - 1) / step + 1 : 0;  // not e - s + step - 1: a huge step overflowed
  if (len <= 1) step = 1;  // the same view, without a stride that overflows
  Shape shape = x.shape(), strides = x.strides();
  shape[a] = len;
  strides[a] *= step;
  Tensor out = view_of(x, shape, strides, x.offset() + (len ? s * x.strides()[a] : 0));
  if (any_requires_grad({x})) {
    auto node = make_node<SliceBackward>({x});
    node->axis = a;
    node->start = s;
    node->step = step;
    set_history(out, node);
  }
  return out;
}

Tensor expand(const Tensor& x, const Shape& shape) {
  check_defined(x, "expand", "x");
  int nd = shape.ndim(), lead = nd - x.ndim();
  QKV_CHECK(lead >= 0, "expand", "cannot expand ", x.shape().str(), " to fewer axes ", shape.str());
  Shape strides = shape;
  for (int d = 0; d < nd; ++d) {
    int xd = d - lead;
    if (xd < 0) {
      strides[d] = 0;
      continue;
    }
    int64_t have = x.shape()[xd];
    QKV_CHECK(have == shape[d] || have == 1, "expand", "cannot expand ", x.shape().str(), " to ", shape.str(),
              " (axis ", d, ": ", have, " vs ", shape[d], ")");
    strides[d] = have == shape[d] ? x.strides()[xd] : 0;
  }
  Tensor out = view_of(x, shape, strides, x.offset());
  if (any_requires_grad({x})) set_history(out, make_node<ExpandBackward>({x}));
  return out;
}

Tensor contiguous(const Tensor& x) {
  check_defined(x, "contiguous", "x");
  if (x.is_contiguous()) return x;
  Tensor out = x.clone();
  if (any_requires_grad({x})) set_history(out, make_node<ContiguousBackward>({x}));
  return out;
}

Tensor concat(const std::vector<Tensor>& xs, int axis) {
  QKV_CHECK(!xs.empty(), "concat", "needs at least one tensor");
  for (size_t i = 0; i < xs.size(); ++i) check_defined(xs[i], "concat", "xs[i]");
  const Tensor& x0 = xs[0];
  QKV_CHECK(x0.ndim() > 0, "concat", "cannot concatenate 0-d tensors");
  int a = axis_of(x0, axis, "concat");
  Shape shape = x0.shape();
  int64_t total = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    QKV_CHECK(x.dtype() == x0.dtype(), "concat", "tensor ", i, " is ", x.str(), " but tensor 0 is ", x0.str());
    bool ok = x.ndim() == x0.ndim();
    for (int d = 0; ok && d < x0.ndim(); ++d) ok = d == a || x.shape()[d] == x0.shape()[d];
    QKV_CHECK(ok, "concat", "tensor ", i, " has shape ", x.shape().str(), " but tensor 0 has ", x0.shape().str(),
              "; all extents but axis ", axis, " must match");
    total += x.shape()[a];
  }
  shape[a] = total;
  Tensor out = Tensor::empty(shape, x0.dtype());
  int64_t pos = 0;
  for (const Tensor& x : xs) {
    int64_t n = x.shape()[a];
    if (n > 0) slice(out, a, pos, pos + n).copy_from(x);
    pos += n;
  }
  if (any_requires_grad(xs)) {
    auto node = make_node<ConcatBackward>(xs);
    node->axis = a;
    set_history(out, node);
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int axis) {
  check_defined(x, "split", "x");
  QKV_CHECK(x.ndim() > 0, "split", "cannot split a 0-d tensor");
  int a = axis_of(x, axis, "split");
  int64_t sum = 0;
  for (int64_t s : sizes) {
    QKV_CHECK(s >= 0, "split", "negative piece size in ", vec_str(sizes));
    sum += s;
  }
  QKV_CHECK(sum == x.shape()[a], "split", "sizes ", vec_str(sizes), " add up to ", sum, ", but axis ", axis, " of ",
            x.shape().str(), " has ", x.shape()[a]);
  std::vector<Tensor> outs;
  int64_t pos = 0;
  for (int64_t s : sizes) {
    Shape shape = x.shape();
    shape[a] = s;
    outs.push_back(view_of(x, shape, x.strides(), x.offset() + (s ? pos * x.strides()[a] : 0)));
    pos += s;
  }
  if (any_requires_grad({x})) {
    auto node = make_node<SplitBackward>({x});
    node->axis = a;
    node->sizes = sizes;
    node->num_outputs = int(sizes.size());
    for (size_t i = 0; i < outs.size(); ++i) set_history(outs[i], node, int(i));
  }
  return outs;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t n, int axis) {
  check_defined(x, "chunk", "x");
  QKV_CHECK(n >= 1, "chunk", "number of chunks must be >= 1, got ", n);
  QKV_CHECK(x.ndim() > 0, "chunk", "cannot chunk a 0-d tensor");
  int a = axis_of(x, axis, "chunk");
  int64_t size = x.shape()[a], piece = (size + n - 1) / n;
  std::vector<int64_t> sizes;
  if (piece == 0) {
    sizes.assign(size_t(n), 0);  // torch: an empty axis gives n empty chunks
  } else {
    for (int64_t pos = 0; pos < size; pos += piece) sizes.push_back(std::min(piece, size - pos));
  }
  return split(x, sizes, a);
}

}  // namespace qkv
