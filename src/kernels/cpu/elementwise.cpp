#include "qkv/kernels/elementwise.h"

#include <cmath>

#include "qkv/tensor/strided.h"

#include "dispatch.h"

namespace qkv::kernels {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;

template <typename T>
inline T apply_unary(Unary op, T x) {
  switch (op) {
    case Unary::neg: return -x;
    case Unary::exp: return std::exp(x);
    case Unary::log: return std::log(x);
    case Unary::sqrt: return std::sqrt(x);
    case Unary::abs: return std::abs(x);
    case Unary::tanh: return std::tanh(x);
    case Unary::sigmoid: return T(1) / (T(1) + std::exp(-x));
    case Unary::relu: return x > T(0) ? x : T(0);
    case Unary::gelu_erf: return T(0.5) * x * (T(1) + std::erf(x * T(kInvSqrt2)));
    case Unary::gelu_tanh: return T(0.5) * x * (T(1) + std::tanh(T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x)));
    case Unary::silu: return x / (T(1) + std::exp(-x));
    case Unary::square: return x * x;
    case Unary::reciprocal: return T(1) / x;
  }
  return x;
}

// d op(x) / dx, written with y = op(x) where that is cheaper.
template <typename T>
inline T derivative(Unary op, T x, T y) {
  switch (op) {
    case Unary::neg: return T(-1);
    case Unary::exp: return y;
    case Unary::log: return T(1) / x;
    case Unary::sqrt: return T(0.5) / y;
    case Unary::abs: return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
    case Unary::tanh: return T(1) - y * y;
    case Unary::sigmoid: return y * (T(1) - y);
    case Unary::relu: return x > T(0) ? T(1) : T(0);
    case Unary::gelu_erf: {
      T cdf = T(0.5) * (T(1) + std::erf(x * T(kInvSqrt2)));
      T pdf = T(kInvSqrt2Pi) * std::exp(T(-0.5) * x * x);
      return cdf + x * pdf;
    }
    case Unary::gelu_tanh: {
      T inner = T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x);
      T t = std::tanh(inner);
      T dinner = T(kSqrt2OverPi) * (T(1) + T(3 * 0.044715) * x * x);
      return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * dinner;
    }
    case Unary::silu: {
      T s = T(1) / (T(1) + std::exp(-x));
      return s * (T(1) + x * (T(1) - s));
    }
    case Unary::square: return T(2) * x;
    case Unary::reciprocal: return -y * y;
  }
  return T(0);
}

// Runs body(i) for i in [0, n), in parallel when n is large.
template <typename Body>
inline void parallel_for(int64_t n, Body&& body) {
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) body(i);
}

}  // namespace

void unary(Unary op, const Tensor& x_in, Tensor& out) {
  Tensor x = x_in.contiguous();
  dispatch_float(x.dtype(), "unary", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* op_ = out.data<T>();
    int64_t n = x.numel();
    // A switch per op outside the loop lets each loop vectorise.
    switch (op) {
#define QKV_UNARY_CASE(OP) \
  case Unary::OP: parallel_for(n, [&](int64_t i) { op_[i] = apply_unary(Unary::OP, xp[i]); }); break;
      QKV_UNARY_CASE(neg) QKV_UNARY_CASE(exp) QKV_UNARY_CASE(log) QKV_UNARY_CASE(sqrt) QKV_UNARY_CASE(abs)
      QKV_UNARY_CASE(tanh) QKV_UNARY_CASE(sigmoid) QKV_UNARY_CASE(relu) QKV_UNARY_CASE(gelu_erf)
      QKV_UNARY_CASE(gelu_tanh) QKV_UNARY_CASE(silu) QKV_UNARY_CASE(square) QKV_UNARY_CASE(reciprocal)
#undef QKV_UNARY_CASE
    }
  });
}

void unary_backward(Unary op, const Tensor& x, const Tensor& y, const Tensor& gy, Tensor& gx) {
  dispatch_float(x.dtype(), "unary_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    const T* yp = y.data<T>();
    const T* gp = gy.data<T>();
    T* out = gx.data<T>();
    parallel_for(x.numel(), [&](int64_t i) { out[i] = gp[i] * derivative(op, xp[i], yp[i]); });
  });
}

void pow_scalar(const Tensor& x_in, double p, Tensor& out) {
  Tensor x = x_in.contiguous();
  dispatch_float(x.dtype(), "pow", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* o = out.data<T>();
    parallel_for(x.numel(), [&](int64_t i) { o[i] = std::pow(xp[i], T(p)); });
  });
}

void pow_scalar_backward(const Tensor& x, double p, const Tensor& gy, Tensor& gx) {
  dispatch_float(x.dtype(), "pow_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    const T* gp = gy.data<T>();
    T* o = gx.data<T>();
    parallel_for(x.numel(), [&](int64_t i) { o[i] = p == 0 ? T(0) : gp[i] * T(p) * std::pow(xp[i], T(p - 1)); });
  });
}

void binary(Binary op, const Tensor& a, const Tensor& b, Tensor& out) {
  dispatch_float(out.dtype(), "binary", [&](auto tag) {
    using T = decltype(tag);
    const T* ap = a.data<T>();
    const T* bp = b.data<T>();
    T* o = out.data<T>();
    auto run = [&](auto f) {
      if (a.shape() == out.shape() && b.shape() == out.shape() && a.is_contiguous() && b.is_contiguous()) {
        parallel_for(out.numel(), [&](int64_t i) { o[i] = f(ap[i], bp[i]); });
        return;
      }
      if (b.numel() == 1 && a.shape() == out.shape() && a.is_contiguous()) {
        T bv = *bp;
        parallel_for(out.numel(), [&](int64_t i) { o[i] = f(ap[i], bv); });
        return;
      }
      // General case: broadcast strides (0 on broadcast axes), one strided row at a time.
      const Shape& os = out.shape();
      int nd = os.ndim();
      Shape sa = os, sb = os;
      for (int d = 0; d < nd; ++d) {
        int da = d - (nd - a.ndim()), db = d - (nd - b.ndim());
        sa[d] = (da >= 0 && a.shape()[da] != 1) ? a.strides()[da] : 0;
        sb[d] = (db >= 0 && b.shape()[db] != 1) ? b.strides()[db] : 0;
      }
      Shape so = Shape::contiguous_strides(os);
      int64_t ia = nd ? sa[nd - 1] : 0, ib = nd ? sb[nd - 1] : 0;
      int64_t inner = nd ? os[nd - 1] : 1;
      int64_t rows = inner ? out.numel() / inner : 0;
      Shape outer = os;
      if (nd) outer[nd - 1] = 1;
#pragma omp parallel for schedule(static) if (out.numel() >= kParallelGrain && rows > 1)
      for (int64_t r = 0; r < rows; ++r) {
        int64_t offa = strided_offset(r, outer, sa), offb = strided_offset(r, outer, sb);
        T* orow = o + r * inner;
        for (int64_t i = 0; i < inner; ++i) orow[i] = f(ap[offa + i * ia], bp[offb + i * ib]);
      }
      (void)so;
    };
    switch (op) {
      case Binary::add: run([](T x, T y) { return x + y; }); break;
      case Binary::sub: run([](T x, T y) { return x - y; }); break;
      case Binary::mul: run([](T x, T y) { return x * y; }); break;
      case Binary::div: run([](T x, T y) { return x / y; }); break;
    }
  });
}

void affine(const Tensor& x_in, double alpha, double beta, Tensor& out) {
  Tensor x = x_in.contiguous();
  dispatch_float(x.dtype(), "affine", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* o = out.data<T>();
    T a = T(alpha), c = T(beta);
    parallel_for(x.numel(), [&](int64_t i) { o[i] = a * xp[i] + c; });
  });
}

void add_inplace(Tensor& dst, const Tensor& src_in) {
  QKV_CHECK(dst.shape() == src_in.shape() && dst.dtype() == src_in.dtype(), "add_inplace", "cannot add ",
            src_in.str(), " into ", dst.str());
  QKV_CHECK(dst.is_contiguous(), "add_inplace", "destination must be contiguous");
  Tensor src = src_in.contiguous();
  dispatch_float(dst.dtype(), "add_inplace", [&](auto tag) {
    using T = decltype(tag);
    T* d = dst.data<T>();
    const T* s = src.data<T>();
    parallel_for(dst.numel(), [&](int64_t i) { d[i] += s[i]; });
  });
}

void scale_inplace(Tensor& dst, double s) {
  QKV_CHECK(dst.is_contiguous(), "scale_inplace", "destination must be contiguous");
  dispatch_float(dst.dtype(), "scale_inplace", [&](auto tag) {
    using T = decltype(tag);
    T* d = dst.data<T>();
    T sv = T(s);
    parallel_for(dst.numel(), [&](int64_t i) { d[i] *= sv; });
  });
}

void sum_to(const Tensor& g_in, const Shape& target, Tensor& out) {
  Tensor g = g_in.contiguous();
  const Shape& gs = g.shape();
  int nd = gs.ndim(), lead = nd - target.ndim();
  QKV_CHECK(lead >= 0, "sum_to", "cannot sum ", gs.str(), " to ", target.str());
  // Output strides per gradient axis: 0 where the target broadcast (so those axes accumulate).
  Shape ts = Shape::contiguous_strides(target);
  Shape os = gs;
  for (int d = 0; d < nd; ++d) {
    int td = d - lead;
    os[d] = (td >= 0 && target[td] != 1) ? ts[td] : 0;
    QKV_CHECK(td < 0 || target[td] == 1 || target[td] == gs[d], "sum_to", "cannot sum ", gs.str(), " to ", target.str());
  }
  dispatch_float(g.dtype(), "sum_to", [&](auto tag) {
    using T = decltype(tag);
    const T* gp = g.data<T>();
    T* o = out.data<T>();
    int64_t tn = target.numel();
    for (int64_t i = 0; i < tn; ++i) o[i] = T(0);
    Shape gst = Shape::contiguous_strides(gs);
    int64_t inner_o = nd ? os[nd - 1] : 0;
    // Serial accumulation keeps results independent of the thread count (determinism).
    for_each_row<2>(gs, {&gst, &os}, [&](const std::array<int64_t, 2>& off, int64_t n) {
      const T* grow = gp + off[0];
      T* orow = o + off[1];
      if (inner_o == 0) {
        T acc = T(0);
        for (int64_t i = 0; i < n; ++i) acc += grow[i];
        orow[0] += acc;
      } else {
        for (int64_t i = 0; i < n; ++i) orow[i] += grow[i];
      }
    });
  });
}

double sum_squares(const Tensor& x_in) {
  Tensor x = x_in.contiguous();
  double total = 0;
  dispatch_float(x.dtype(), "sum_squares", [&](auto tag) {
    using T = decltype(tag);
    const T* p = x.data<T>();
    int64_t n = x.numel();
#pragma omp parallel for reduction(+ : total) schedule(static) if (n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) total += double(p[i]) * double(p[i]);
  });
  return total;
}

}  // namespace qkv::kernels
