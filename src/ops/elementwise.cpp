#include "qkv/ops/elementwise.h"

#include "qkv/autograd/node.h"
#include "qkv/kernels/elementwise.h"

namespace qkv {
namespace {

using kernels::Binary;
using kernels::Unary;

void check_binary(const Tensor& a, const Tensor& b, const char* op) {
  check_floating(a, op, "a");
  check_floating(b, op, "b");
  QKV_CHECK(a.dtype() == b.dtype(), op, "dtypes differ: ", a.str(), " and ", b.str());
}

Tensor binary_forward(Binary op, const Tensor& a, const Tensor& b, const char* name) {
  check_binary(a, b, name);
  Tensor out = Tensor::empty(Shape::broadcast(a.shape(), b.shape(), name), a.dtype());
  kernels::binary(op, a, b, out);
  return out;
}

// Recorded binary op. The backward reduces each input's gradient over its broadcast axes.
struct BinaryBackward : Node {
  Binary op;
  Tensor a, b;  // saved only for mul/div
  const char* name() const override {
    switch (op) {
      case Binary::add: return "AddBackward";
      case Binary::sub: return "SubBackward";
      case Binary::mul: return "MulBackward";
      case Binary::div: return "DivBackward";
    }
    return "BinaryBackward";
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    const Tensor& gy = g[0];
    Tensor ga, gb;
    bool need_a = next[0].valid(), need_b = next[1].valid();
    switch (op) {
      case Binary::add:  // y = a + b
        if (need_a) ga = gy;
        if (need_b) gb = gy;
        break;
      case Binary::sub:  // y = a - b
        if (need_a) ga = gy;
        if (need_b) gb = neg(gy);
        break;
      case Binary::mul:  // y = a * b
        if (need_a) ga = mul(gy, b);
        if (need_b) gb = mul(gy, a);
        break;
      case Binary::div:  // y = a / b: da = g / b, db = -g a / b^2
        if (need_a) ga = div(gy, b);
        if (need_b) gb = neg(div(mul(gy, a), mul(b, b)));
        break;
    }
    if (ga.defined() && ga.shape() != input_shapes[0]) ga = sum_to(ga, input_shapes[0]);
    if (gb.defined() && gb.shape() != input_shapes[1]) gb = sum_to(gb, input_shapes[1]);
    return {ga, gb};
  }
  void release_saved() override { a = b = Tensor(); }
};

Tensor binary_op(Binary op, const Tensor& a, const Tensor& b, const char* name) {
  Tensor out = binary_forward(op, a, b, name);
  if (any_requires_grad({a, b})) {
    auto node = make_node<BinaryBackward>({a, b});
    node->op = op;
    if (op == Binary::mul || op == Binary::div) {
      node->a = node->save(a);
      node->b = node->save(b);
    }
    set_history(out, node);
  }
  return out;
}

struct UnaryBackward : Node {
  Unary op;
  const char* label = "UnaryBackward";
  Tensor x, y;  // y = op(x), both contiguous
  const char* name() const override { return label; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    Tensor gx = Tensor::empty(x.shape(), x.dtype());
    kernels::unary_backward(op, x, y, g[0].contiguous(), gx);
    return {gx};
  }
  void release_saved() override { x = y = Tensor(); }
};

Tensor unary_op(Unary op, const Tensor& x, const char* name, const char* backward_name) {
  check_floating(x, name, "x");
  Tensor xc = x.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  kernels::unary(op, xc, out);
  if (any_requires_grad({x})) {
    auto node = make_node<UnaryBackward>({x});
    node->op = op;
    node->label = backward_name;
    node->x = node->save(xc);
    node->y = node->save(out);
    set_history(out, node);
  }
  return out;
}

struct AffineBackward : Node {  // y = alpha * x + beta
  double alpha = 1;
  const char* name() const override { return "AffineBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    Tensor gx = Tensor::empty(g[0].shape(), g[0].dtype());
    kernels::affine(g[0], alpha, 0.0, gx);
    return {gx};
  }
};

struct PowBackward : Node {  // y = x ^ p
  double p = 1;
  Tensor x;
  const char* name() const override { return "PowBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    Tensor gx = Tensor::empty(x.shape(), x.dtype());
    kernels::pow_scalar_backward(x, p, g[0].contiguous(), gx);
    return {gx};
  }
  void release_saved() override { x = Tensor(); }
};

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary_op(Binary::add, a, b, "add"); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary_op(Binary::sub, a, b, "sub"); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary_op(Binary::mul, a, b, "mul"); }
Tensor div(const Tensor& a, const Tensor& b) { return binary_op(Binary::div, a, b, "div"); }

Tensor affine(const Tensor& x, double alpha, double beta) {
  check_floating(x, "affine", "x");
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  kernels::affine(x, alpha, beta, out);
  if (any_requires_grad({x})) {
    auto node = make_node<AffineBackward>({x});
    node->alpha = alpha;
    set_history(out, node);
  }
  return out;
}
Tensor add(const Tensor& a, double s) { return affine(a, 1.0, s); }
Tensor mul(const Tensor& a, double s) { return affine(a, s, 0.0); }

Tensor neg(const Tensor& x) { return unary_op(Unary::neg, x, "neg", "NegBackward"); }
Tensor exp(const Tensor& x) { return unary_op(Unary::exp, x, "exp", "ExpBackward"); }
Tensor log(const Tensor& x) { return unary_op(Unary::log, x, "log", "LogBackward"); }
Tensor sqrt(const Tensor& x) { return unary_op(Unary::sqrt, x, "sqrt", "SqrtBackward"); }
Tensor abs(const Tensor& x) { return unary_op(Unary::abs, x, "abs", "AbsBackward"); }
Tensor square(const Tensor& x) { return unary_op(Unary::square, x, "square", "SquareBackward"); }
Tensor tanh(const Tensor& x) { return unary_op(Unary::tanh, x, "tanh", "TanhBackward"); }
Tensor sigmoid(const Tensor& x) { return unary_op(Unary::sigmoid, x, "sigmoid", "SigmoidBackward"); }
Tensor relu(const Tensor& x) { return unary_op(Unary::relu, x, "relu", "ReluBackward"); }
Tensor silu(const Tensor& x) { return unary_op(Unary::silu, x, "silu", "SiluBackward"); }
Tensor gelu(const Tensor& x, GeluApprox approx) {
  return approx == GeluApprox::tanh ? unary_op(Unary::gelu_tanh, x, "gelu", "GeluTanhBackward")
                                    : unary_op(Unary::gelu_erf, x, "gelu", "GeluBackward");
}

Tensor pow(const Tensor& x, double p) {
  check_floating(x, "pow", "x");
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  kernels::pow_scalar(x, p, out);
  if (any_requires_grad({x})) {
    auto node = make_node<PowBackward>({x});
    node->p = p;
    node->x = node->save(x.contiguous());
    set_history(out, node);
  }
  return out;
}

// Not recorded: used inside backward functions, whose gradients are not differentiated again.
Tensor sum_to(const Tensor& g, const Shape& shape) {
  Tensor out = Tensor::empty(shape, g.dtype());
  kernels::sum_to(g, shape, out);
  return out;
}

}  // namespace qkv
