// matmul (torch.matmul semantics) and linear (torch.nn.functional.linear), forward + backward.
#include "qkv/ops/matmul.h"

#include <optional>

#include "qkv/autograd/node.h"
#include "qkv/kernels/bf16.h"
#include "qkv/kernels/bf16_step_weights.h"
#include "qkv/kernels/gemm.h"
#include "qkv/ops/shape.h"

namespace qkv {
namespace {

// The transpose of the last two axes as a raw view (no copy, not recorded): BLAS sees a flag.
Tensor mT(const Tensor& t) {
  Shape s = t.shape(), st = t.strides();
  int n = s.ndim();
  std::swap(s[n - 1], s[n - 2]);
  std::swap(st[n - 1], st[n - 2]);
  return t.as_strided(s, st, t.offset());
}

Shape batch_of(const Tensor& t) {
  std::vector<int64_t> v = t.shape().vec();
  v.resize(v.size() - 2);
  return Shape(v);
}

struct MatmulBackward : Node {  // y (batch, M, N) = a (.., M, K) @ b (.., K, N)
  Tensor a, b;                  // the operands as given (views, not copies)
  Shape batch;
  const char* name() const override { return "MatmulBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    const Tensor& gy = g[0];  // (batch, M, N)
    Tensor ga, gb;
    if (next[0].valid()) {  // da = dy @ b^T, summed over a's broadcast batch axes
      ga = Tensor::empty(a.shape(), a.dtype());
      kernels::batched_matmul(gy, mT(b), batch, ga);
    }
    if (next[1].valid()) {  // db = a^T @ dy, summed over b's broadcast batch axes
      gb = Tensor::empty(b.shape(), b.dtype());
      kernels::batched_matmul(mT(a), gy, batch, gb);
    }
    return {ga, gb};
  }
  void release_saved() override { a = b = Tensor(); }
};

// a (.., M, K) @ b (.., K, N), both at least 2-D; shapes already checked.
Tensor matmul_nd(const Tensor& a, const Tensor& b, const Shape& batch) {
  std::vector<int64_t> os = batch.vec();
  os.push_back(a.size(-2));
  os.push_back(b.size(-1));
  Tensor out = Tensor::empty(Shape(os), a.dtype());
  kernels::batched_matmul(a, b, batch, out);
  if (any_requires_grad({a, b})) {
    auto node = make_node<MatmulBackward>({a, b});
    node->a = node->save(a);
    node->b = node->save(b);
    node->batch = batch;
    set_history(out, node);
  }
  return out;
}

struct LinearBackward : Node {  // y (R, N) = x (R, K) @ w^T (w (N, K)) + b (N)
  Tensor x2, w;                 // x2: x as (R, K)
  Tensor x16;                   // x2 rounded to bf16 by the forward (native bf16 products), for dW
  const char* name() const override { return "LinearBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    const Shape& xs = input_shapes[0];
    int64_t R = x2.size(0), K = x2.size(1), N = w.size(0);
    Tensor gy = reshape(g[0], {R, N});
    Tensor gx, gw, gb;
    const bool want_gb = next.size() > 2 && next[2].valid();
    // bf16 (native): dY rounded once for both products rather than once per product, in the same
    // pass over dY as the bias gradient's column sums when there is one.
    std::optional<kernels::Bf16RoundedOperand> gy16;
    if (next[0].valid() && next[1].valid() && gy.dtype() == DType::f32 && kernels::native_bf16_products()) {
      gy = gy.contiguous();
      if (want_gb) {
        gb = Tensor::empty({N}, w.dtype());
        gy16.emplace(gy, &gb);
      } else {
        gy16.emplace(gy.data<float>(), R, N, N);
      }
    }
    if (next[0].valid()) {  // dx = dy @ w
      gx = Tensor::empty({R, K}, w.dtype());
      kernels::matmul_2d(gy, w, gx);
      gx = reshape(gx, xs);
    }
    if (next[1].valid()) {  // dw = dy^T @ x
      std::optional<kernels::Bf16RoundedOperand> x2_16;  // x as the forward rounded it
      if (x16.defined() && kernels::native_bf16_products()) x2_16.emplace(x2, x16);
      gw = Tensor::empty({N, K}, w.dtype());
      kernels::matmul_2d(mT(gy), x2, gw);
    }
    if (want_gb && !gb.defined()) {  // db = 1^T @ dy: column sums of dy
      gb = Tensor::empty({N}, w.dtype());
      kernels::column_sums(gy.contiguous(), gb);
    }
    return {gx, gw, gb};
  }
  void release_saved() override { x2 = w = x16 = Tensor(); }
};

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_floating(a, "matmul", "a");
  check_floating(b, "matmul", "b");
  QKV_CHECK(a.dtype() == b.dtype(), "matmul", "dtypes differ: ", a.str(), " and ", b.str());
  QKV_CHECK(a.ndim() >= 1 && b.ndim() >= 1, "matmul", "both operands need at least one axis, got ",
            a.shape().str(), " and ", b.shape().str());
  int64_t ka = a.size(-1), kb = b.ndim() == 1 ? b.size(0) : b.size(-2);
  QKV_CHECK(ka == kb, "matmul", "shapes ", a.shape().str(), " and ", b.shape().str(), " cannot be multiplied (",
            ka, " != ", kb, ")");
  // A 1-D operand becomes a one-row (a) / one-column (b) matrix, removed again afterwards.
  Tensor a2 = a.ndim() == 1 ? unsqueeze(a, 0) : a;
  Tensor b2 = b.ndim() == 1 ? unsqueeze(b, -1) : b;
  Shape ba = batch_of(a2), bb = batch_of(b2);
  int nb = std::max(ba.ndim(), bb.ndim());
  std::vector<int64_t> batch(static_cast<size_t>(nb));
  for (int d = 0; d < nb; ++d) {
    int da = d - (nb - ba.ndim()), db = d - (nb - bb.ndim());
    int64_t x = da >= 0 ? ba[da] : 1, y = db >= 0 ? bb[db] : 1;
    QKV_CHECK(x == y || x == 1 || y == 1, "matmul", "batch axes of ", a.shape().str(), " and ", b.shape().str(),
              " do not broadcast (", ba.str(), " vs ", bb.str(), ")");
    batch[size_t(d)] = x == 1 ? y : x;
  }
  Tensor y = matmul_nd(a2, b2, Shape(batch));
  if (b.ndim() == 1) y = squeeze(y, -1);
  if (a.ndim() == 1) y = squeeze(y, -1 - (b.ndim() == 1 ? 0 : 1));
  return y;
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  check_floating(x, "linear", "x");
  check_floating(w, "linear", "w");
  QKV_CHECK(w.ndim() == 2, "linear", "weight must be (out, in), got ", w.shape().str());
  QKV_CHECK(x.ndim() >= 1 && x.size(-1) == w.size(1), "linear", "input ", x.shape().str(),
            " does not end in the weight's in_features ", w.size(1), " (weight ", w.shape().str(), ")");
  QKV_CHECK(x.dtype() == w.dtype(), "linear", "dtypes differ: x ", x.str(), ", w ", w.str());
  if (b.defined()) {
    QKV_CHECK(b.dtype() == w.dtype(), "linear", "dtypes differ: b ", b.str(), ", w ", w.str());
    QKV_CHECK(b.ndim() == 1 && b.size(0) == w.size(0), "linear", "bias must be (", w.size(0), "), got ",
              b.shape().str());
  }
  int64_t K = w.size(1), N = w.size(0), R = K ? x.numel() / K : 0;
  if (K == 0) {  // x (..., 0): R comes from the leading axes
    R = 1;
    for (int d = 0; d + 1 < x.ndim(); ++d) R *= x.shape()[d];
  }
  Tensor x2 = reshape(x.detach(), {R, K});  // a view when x's leading axes merge, else a copy
  Tensor out = Tensor::empty({R, N}, x.dtype());
  const bool record = any_requires_grad({x, w, b});
  // Mixed-precision training: x rounded to bf16 once, for this product and for dW in the backward.
  std::optional<kernels::Bf16RoundedOperand> x16;
  if (record && w.requires_grad() && x2.dtype() == DType::f32 && R > 0 && K > 0 && x2.strides()[1] == 1 &&
      kernels::native_bf16_products())
    x16.emplace(x2, Tensor());
  kernels::linear(x2, w, b, out);
  std::vector<int64_t> os = x.shape().vec();
  os.back() = N;
  Tensor y = out.as_strided(Shape(os), Shape::contiguous_strides(Shape(os)), 0);
  if (record) {
    auto node = make_node<LinearBackward>({x, w, b});
    node->x2 = node->save(x2);
    node->w = node->save(w);
    if (x16) node->x16 = x16->kept();
    set_history(y, node);
  }
  return y;
}

}  // namespace qkv
