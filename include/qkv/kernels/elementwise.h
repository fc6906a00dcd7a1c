// qkv/kernels/elementwise.h - CPU elementwise kernels (f32, f64), OpenMP above a size threshold.
// Kernels do no autograd and little validation: the ops/ front-ends validate and dispatch.
#pragma once
#include "qkv/tensor/tensor.h"

namespace qkv::kernels {

enum class Unary { neg, exp, log, sqrt, abs, tanh, sigmoid, relu, gelu_erf, gelu_tanh, silu, square, reciprocal };
enum class Binary { add, sub, mul, div };

// Elements per OpenMP task below which a loop stays serial (thread start-up costs more).
constexpr int64_t kParallelGrain = 32768;

// out = op(x); x and out same shape, out contiguous (x may be strided).
void unary(Unary op, const Tensor& x, Tensor& out);
// out = dL/dx given x, y = op(x) and gy = dL/dy (all contiguous, same shape).
void unary_backward(Unary op, const Tensor& x, const Tensor& y, const Tensor& gy, Tensor& gx);
// out = x ^ p, and its backward gx = gy * p * x^(p-1).
void pow_scalar(const Tensor& x, double p, Tensor& out);
void pow_scalar_backward(const Tensor& x, double p, const Tensor& gy, Tensor& gx);
// out = a op b with numpy broadcasting; out has the broadcast shape and is contiguous.
void binary(Binary op, const Tensor& a, const Tensor& b, Tensor& out);
// out = alpha * x + beta (affine with scalars).
void affine(const Tensor& x, double alpha, double beta, Tensor& out);
// dst += src (same shape; dst contiguous).
void add_inplace(Tensor& dst, const Tensor& src);
// dst *= s (dst contiguous).
void scale_inplace(Tensor& dst, double s);
// Sums g (broadcast shape) down to `target` (the shape it was broadcast from): out contiguous.
void sum_to(const Tensor& g, const Shape& target, Tensor& out);

}  // namespace qkv::kernels
