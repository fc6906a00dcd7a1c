#include "qkv/tensor/tensor.h"

#include <cstring>
#include <limits>
#include <type_traits>
#include <sstream>

#include "qkv/tensor/strided.h"

namespace qkv {
namespace {

std::shared_ptr<TensorImpl> make_impl(const Shape& shape, DType dtype) {
  auto impl = std::make_shared<TensorImpl>();
  size_t bytes = 0;  // a wrapped size allocated a few bytes for 2^62 elements, and fill() wrote past them
  QKV_CHECK(!__builtin_mul_overflow(size_t(shape.numel()), dtype_size(dtype), &bytes) &&
                bytes <= size_t(std::numeric_limits<int64_t>::max()),
            "Tensor", "a ", dtype_name(dtype), " tensor of shape ", shape.str(), " is too large to allocate");
  impl->storage = Storage::allocate(bytes);
  impl->shape = shape;
  impl->strides = Shape::contiguous_strides(shape);
  impl->dtype = dtype;
  return impl;
}

// Calls fn with a typed null pointer for dtype t (bf16 and friends throw).
template <typename Fn>
void dispatch_all(DType t, const char* op, Fn&& fn) {
  switch (t) {
    case DType::f32: fn(static_cast<float*>(nullptr)); return;
    case DType::f64: fn(static_cast<double*>(nullptr)); return;
    case DType::i32: fn(static_cast<int32_t*>(nullptr)); return;
    case DType::i64: fn(static_cast<int64_t*>(nullptr)); return;
    case DType::u8: fn(static_cast<uint8_t*>(nullptr)); return;
    case DType::boolean: fn(static_cast<bool*>(nullptr)); return;
    default: fail(op, "dtype ", dtype_name(t), " is not supported yet");
  }
}

// Whether the floating value v converts to the integer type T: NaN, infinities and values past T's
// range do not (the conversion is undefined behaviour; x86 gave INT64_MIN). bool takes anything.
template <typename T>
bool converts_to(double v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    return v >= double(std::numeric_limits<T>::min()) && v < double(std::numeric_limits<T>::max()) + 1.0;
  return true;
}

// Strided element copy with conversion: dst view <- src view (same shape).
template <typename D, typename S>
void copy_typed(const Tensor& dst, const Tensor& src) {
  D* d = dst.data<D>();
  const S* s = src.data<S>();
  if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D> && !std::is_same_v<D, bool>) {
    bool fits = true;
    for_each_row<1>(src.shape(), {&src.strides()}, [&](const std::array<int64_t, 1>& off, int64_t n) {
      const int64_t ss = src.ndim() ? src.strides()[src.ndim() - 1] : 1;
      for (int64_t i = 0; i < n && fits; ++i) fits = converts_to<D>(double(s[off[0] + i * ss]));
    });
    QKV_CHECK(fits, "Tensor::to", src.str(), " holds a value (NaN, an infinity or one out of range) that ",
              dtype_name(dst.dtype()), " cannot hold");
  }
  if (dst.is_contiguous() && src.is_contiguous()) {
    int64_t n = dst.numel();
    if constexpr (std::is_same_v<D, S>) {
      std::memcpy(d, s, size_t(n) * sizeof(D));
    } else {
#pragma omp parallel for schedule(static) if (n > 262144)
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<D>(s[i]);
    }
    return;
  }
  for_each_row<2>(dst.shape(), {&dst.strides(), &src.strides()}, [&](const std::array<int64_t, 2>& off, int64_t n) {
    int64_t ds = dst.ndim() ? dst.strides()[dst.ndim() - 1] : 1;
    int64_t ss = src.ndim() ? src.strides()[src.ndim() - 1] : 1;
    D* dp = d + off[0];
    const S* sp = s + off[1];
    for (int64_t i = 0; i < n; ++i) dp[i * ds] = static_cast<D>(sp[i * ss]);
  });
}

// dst view (f32 or bf16) <- src view of bf16 bits (same shape): widened to f32 exactly (the bits
// in the high half), or the bits copied. Rounding f32 to bf16 is kernels' (to_bf16), not here.
void copy_from_bf16(const Tensor& dst, const Tensor& src) {
  QKV_CHECK(dst.dtype() == DType::f32 || dst.dtype() == DType::bf16, "Tensor::copy_from",
            "a bf16 tensor copies into f32 or bf16, not ", dtype_name(dst.dtype()));
  const bool widen = dst.dtype() == DType::f32;
  auto* d = static_cast<char*>(dst.impl_ptr()->storage->data()) + dst.offset() * int64_t(dtype_size(dst.dtype()));
  const auto* s = static_cast<const uint16_t*>(src.impl_ptr()->storage->data()) + src.offset();
  for_each_row<2>(dst.shape(), {&dst.strides(), &src.strides()}, [&](const std::array<int64_t, 2>& off, int64_t n) {
    const int64_t ds = dst.ndim() ? dst.strides()[dst.ndim() - 1] : 1;
    const int64_t ss = src.ndim() ? src.strides()[src.ndim() - 1] : 1;
    const uint16_t* sp = s + off[1];
    if (widen) {
      uint32_t* dp = reinterpret_cast<uint32_t*>(d) + off[0];
      for (int64_t i = 0; i < n; ++i) dp[i * ds] = uint32_t(sp[i * ss]) << 16;  // f32 bits
    } else {
      uint16_t* dp = reinterpret_cast<uint16_t*>(d) + off[0];
      for (int64_t i = 0; i < n; ++i) dp[i * ds] = sp[i * ss];
    }
  });
}

}  // namespace

TensorImpl& Tensor::impl() const {
  QKV_CHECK(impl_ != nullptr, "Tensor", "use of an undefined tensor");
  return *impl_;
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  // bf16: storage for weights held in bf16 (nn::hold_in_bf16); the ops that take it say so.
  if (dtype != DType::bf16) dispatch_all(dtype, "Tensor::empty", [](auto*) {});
  return Tensor(make_impl(shape, dtype));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.raw_data(), 0, size_t(t.numel()) * dtype_size(dtype));
  return t;
}

Tensor Tensor::zeros_to_fill(const Shape& shape, DType dtype) {
  dispatch_all(dtype, "Tensor::zeros_to_fill", [](auto*) {});
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::allocate_zeroed(size_t(shape.numel()) * dtype_size(dtype));
  impl->shape = shape;
  impl->strides = Shape::contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(impl);
}

Tensor Tensor::ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.fill(value);
  return t;
}

Tensor Tensor::scalar(double value, DType dtype) { return full(Shape{}, value, dtype); }

Tensor Tensor::arange(int64_t n, DType dtype) {
  Tensor t = empty(Shape{n}, dtype);
  dispatch_all(dtype, "Tensor::arange", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(i);
  });
  return t;
}

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape) {
  QKV_CHECK(int64_t(values.size()) == shape.numel(), "Tensor::from_vector", "shape ", shape.str(), " needs ",
            shape.numel(), " values, got ", values.size());
  Tensor t = empty(shape, dtype_of<T>());
  T* p = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}
template Tensor Tensor::from_vector(const std::vector<float>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<double>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<int32_t>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<int64_t>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<uint8_t>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<bool>&, const Shape&);

Tensor Tensor::from_data(const void* data, const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memcpy(t.raw_data(), data, size_t(shape.numel()) * dtype_size(dtype));
  return t;
}

bool Tensor::is_contiguous() const {
  const auto& s = shape();
  const auto& st = strides();
  int64_t expect = 1;
  for (int i = s.ndim() - 1; i >= 0; --i) {
    if (s[i] != 1 && st[i] != expect) return false;
    expect *= s[i];
  }
  return true;
}

std::string Tensor::str() const {
  if (!defined()) return "undefined";
  return std::string(dtype_name(dtype())) + shape().str();
}

template <typename T>
T* Tensor::data() const {
  QKV_CHECK(dtype() == dtype_of<T>(), "Tensor::data", "tensor is ", dtype_name(dtype()), ", accessed as ",
            dtype_name(dtype_of<T>()));
  return static_cast<T*>(impl().storage->data()) + impl().offset;
}
template float* Tensor::data<float>() const;
template double* Tensor::data<double>() const;
template int32_t* Tensor::data<int32_t>() const;
template int64_t* Tensor::data<int64_t>() const;
template uint8_t* Tensor::data<uint8_t>() const;
template bool* Tensor::data<bool>() const;

void* Tensor::raw_data() const {
  return static_cast<char*>(impl().storage->data()) + impl().offset * int64_t(dtype_size(dtype()));
}

double Tensor::item() const {
  QKV_CHECK(numel() == 1, "Tensor::item", "needs a one-element tensor, got ", str());
  double v = 0;
  dispatch_all(dtype(), "Tensor::item", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    v = double(*data<T>());
  });
  return v;
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = dtype() == dtype_of<T>() ? contiguous() : to(dtype_of<T>());
  const T* p = c.data<T>();
  return std::vector<T>(p, p + c.numel());
}
template std::vector<float> Tensor::to_vector() const;
template std::vector<double> Tensor::to_vector() const;
template std::vector<int32_t> Tensor::to_vector() const;
template std::vector<int64_t> Tensor::to_vector() const;
template std::vector<uint8_t> Tensor::to_vector() const;

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype());
  out.copy_from(*this);
  return out;
}

Tensor Tensor::to(DType d) const {
  Tensor out = empty(shape(), d);
  out.copy_from(*this);
  return out;
}

Tensor Tensor::as_strided(const Shape& shape, const Shape& strides, int64_t offset) const {
  QKV_CHECK(shape.ndim() == strides.ndim(), "as_strided", "shape ", shape.str(), " and strides ", strides.str(),
            " differ in rank");
  int64_t lo = offset, hi = offset;
  for (int i = 0; i < shape.ndim(); ++i) {
    if (shape[i] == 0) { hi = lo - 1; break; }
    int64_t span = (shape[i] - 1) * strides[i];
    (span < 0 ? lo : hi) += span;
  }
  int64_t cap = int64_t(storage()->nbytes() / dtype_size(dtype()));
  QKV_CHECK(lo >= 0 && (hi < cap || hi < lo), "as_strided", "view ", shape.str(), " strides ", strides.str(),
            " offset ", offset, " exceeds storage of ", cap, " elements");
  auto impl2 = std::make_shared<TensorImpl>();
  impl2->storage = storage();
  impl2->offset = offset;
  impl2->shape = shape;
  impl2->strides = strides;
  impl2->dtype = dtype();
  return Tensor(impl2);
}

Tensor Tensor::detach() const { return as_strided(shape(), strides(), offset()); }

void Tensor::copy_from(const Tensor& src) {
  QKV_CHECK(src.shape() == shape(), "Tensor::copy_from", "shape ", src.shape().str(), " into ", shape().str());
  if (src.dtype() == DType::bf16) {
    copy_from_bf16(*this, src);
    mark_modified();
    return;
  }
  dispatch_all(dtype(), "Tensor::copy_from", [&](auto* dtag) {
    using D = std::remove_pointer_t<decltype(dtag)>;
    dispatch_all(src.dtype(), "Tensor::copy_from", [&](auto* stag) {
      using S = std::remove_pointer_t<decltype(stag)>;
      copy_typed<D, S>(*this, src);
    });
  });
  mark_modified();
}

void Tensor::fill(double value) {
  mark_modified();
  dispatch_all(dtype(), "Tensor::fill", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    QKV_CHECK(converts_to<T>(value), "Tensor::fill", "the value ", value, " does not fit in ", dtype_name(dtype()));
    T v = static_cast<T>(value);
    T* p = data<T>();
    if (is_contiguous()) {
      int64_t n = numel();
#pragma omp parallel for schedule(static) if (n > 262144)
      for (int64_t i = 0; i < n; ++i) p[i] = v;
      return;
    }
    for_each_row<1>(shape(), {&strides()}, [&](const std::array<int64_t, 1>& off, int64_t n) {
      int64_t s = ndim() ? strides()[ndim() - 1] : 1;
      for (int64_t i = 0; i < n; ++i) p[off[0] + i * s] = v;
    });
  });
}

Tensor& Tensor::set_requires_grad(bool on) {
  QKV_CHECK(is_leaf(), "set_requires_grad", "only leaf tensors can change requires_grad");
  QKV_CHECK(!on || is_floating(dtype()), "set_requires_grad", "only floating tensors can require grad, got ",
            dtype_name(dtype()));
  impl().requires_grad = on;
  return *this;
}

void check_defined(const Tensor& t, const char* op, const char* arg) {
  QKV_CHECK(t.defined(), op, "argument '", arg, "' is an undefined tensor");
}

void check_dtype(const Tensor& t, DType d, const char* op, const char* arg) {
  check_defined(t, op, arg);
  QKV_CHECK(t.dtype() == d, op, "argument '", arg, "' must be ", dtype_name(d), ", got ", t.str());
}

void check_floating(const Tensor& t, const char* op, const char* arg) {
  check_defined(t, op, arg);
  QKV_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64, op, "argument '", arg,
            "' must be f32 or f64, got ", t.str());
}

}  // namespace qkv
