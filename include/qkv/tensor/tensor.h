// qkv/tensor/tensor.h - Tensor: a typed, strided view of a Storage, plus autograd metadata.
//
// Tensors are cheap handles (shared_ptr to TensorImpl). Views (as_strided, and the view ops in
// ops/shape.h built on it) share storage. Elementwise kernels want contiguous memory: they call
// contiguous(), which returns the tensor itself when it already is, and a copy otherwise.
// Differentiable ops live in ops/; this layer knows only data, shapes and the autograd fields.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qkv/tensor/dtype.h"
#include "qkv/tensor/shape.h"
#include "qkv/tensor/storage.h"
#include "qkv/util/error.h"

namespace qkv {

struct Node;  // autograd/node.h

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements
  Shape shape;
  Shape strides;       // in elements
  DType dtype = DType::f32;

  // autograd
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;      // accumulated gradient of a leaf
  std::shared_ptr<Node> grad_fn;         // the node that produced this tensor (non-leaf)
  int output_nr = 0;                     // which output of grad_fn
  std::weak_ptr<Node> grad_accumulator;  // leaf: the AccumulateGrad node, made on demand
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- factories (never require grad) ----
  static Tensor empty(const Shape& shape, DType dtype = DType::f32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  // Zeros to be filled later (Storage::allocate_zeroed): a large one costs no memory until written.
  static Tensor zeros_to_fill(const Shape& shape, DType dtype = DType::f32);
  static Tensor ones(const Shape& shape, DType dtype = DType::f32);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
  static Tensor scalar(double value, DType dtype = DType::f32);  // shape ()
  static Tensor arange(int64_t n, DType dtype = DType::i64);
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape);
  static Tensor from_data(const void* data, const Shape& shape, DType dtype);  // copies
  static Tensor empty_like(const Tensor& t) { return empty(t.shape(), t.dtype()); }
  static Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype()); }

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  int ndim() const { return impl().shape.ndim(); }
  int64_t size(int axis) const { return impl().shape.at(axis); }  // negative counts from back
  int64_t numel() const { return impl().shape.numel(); }
  DType dtype() const { return impl().dtype; }
  int64_t offset() const { return impl().offset; }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }
  std::string str() const;  // "f32(2, 3)"

  // ---- data ----
  // Pointer to element 0 of this view; throws if T does not match dtype().
  template <typename T> T* data() const;
  void* raw_data() const;
  double item() const;                                    // one-element tensor -> double
  template <typename T> std::vector<T> to_vector() const;  // row-major copy of the view

  // ---- copies and raw views (not differentiable; ops/ wraps them for autograd) ----
  Tensor contiguous() const;  // *this if contiguous, else a row-major copy (no autograd)
  Tensor clone() const;       // always a fresh contiguous copy (no autograd)
  Tensor to(DType dtype) const;  // converted copy (no autograd); bf16 converts to f32 or bf16 only
  Tensor as_strided(const Shape& shape, const Shape& strides, int64_t offset) const;
  Tensor detach() const;      // same data, no autograd history
  // Element-wise copy into this view; shapes must match. A bf16 src copies into f32 (widened,
  // exact) or bf16; nothing copies into bf16 from another dtype (rounding is kernels::to_bf16's).
  void copy_from(const Tensor& src);
  void fill(double value);
  // Announces an in-place write made through data<T>() / raw_data() (bumps the storage's
  // version, storage.h): call it after writing a parameter's values by hand.
  void mark_modified() const { impl().storage->bump_version(); }
  void zero() { fill(0.0); }

  // ---- autograd fields ----
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& set_requires_grad(bool on);  // leaves only
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  Tensor grad() const { return Tensor(impl().grad); }  // undefined if none yet
  void set_grad(const Tensor& g) { impl().grad = g.impl_; }
  void zero_grad() { impl().grad.reset(); }
  const std::shared_ptr<Node>& grad_fn() const { return impl().grad_fn; }

  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Throws naming `op` unless t is defined and has dtype d.
void check_dtype(const Tensor& t, DType d, const char* op, const char* arg);
void check_floating(const Tensor& t, const char* op, const char* arg);
void check_defined(const Tensor& t, const char* op, const char* arg);

}  // namespace qkv
