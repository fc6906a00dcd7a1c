// Gather / index_select / where kernels and their scatter-add backward (see kernels/index.h).
#include "qkv/kernels/index.h"

#include <algorithm>
#include <cstring>

#include "qkv/kernels/bf16.h"
#include "qkv/kernels/elementwise.h"
#include "qkv/kernels/parallel.h"
#include "qkv/tensor/held_int8.h"
#include "qkv/tensor/strided.h"

#include "dispatch.h"

namespace qkv::kernels {
namespace {

// Calls fn(U{}) with an unsigned type of x's element size: gather and select only move bits.
template <typename Fn>
void dispatch_bits(DType t, const char* op, Fn&& fn) {
  switch (dtype_size(t)) {
    case 1: fn(uint8_t{}); return;
    case 2: fn(uint16_t{}); return;
    case 4: fn(uint32_t{}); return;
    case 8: fn(uint64_t{}); return;
    default: fail(op, "unsupported element size for ", dtype_name(t));
  }
}

// Index values as int64 (i64 or i32 input), row-major.
std::vector<int64_t> index_values(const Tensor& index) { return index.to_vector<int64_t>(); }

// Strides of t aligned to `shape` (t broadcasts to it): 0 on new and broadcast axes.
Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  Shape st = shape;
  int lead = shape.ndim() - t.ndim();
  for (int d = 0; d < shape.ndim(); ++d) {
    int td = d - lead;
    st[d] = (td >= 0 && t.shape()[td] != 1) ? t.strides()[td] : 0;
  }
  return st;
}

// Walks index's shape; fn(flat, x_off) where x_off is the offset (under xstrides) of the
// element at the same coordinates with the `axis` coordinate set to 0.
template <typename Fn>
void walk_axis_zeroed(const Shape& ishape, const Shape& xstrides, int axis, Fn&& fn) {
  Shape zs = xstrides;
  zs[axis] = 0;
  Shape cs = Shape::contiguous_strides(ishape);
  int nd = ishape.ndim();
  int64_t inner_s = nd ? zs[nd - 1] : 0;
  for_each_row<2>(ishape, {&cs, &zs}, [&](const std::array<int64_t, 2>& off, int64_t n) {
    for (int64_t i = 0; i < n; ++i) fn(off[0] + i, off[1] + i * inner_s);
  });
}

}  // namespace

void gather(const Tensor& x, int axis, const Tensor& index, Tensor& out) {
  std::vector<int64_t> idx = index_values(index);
  int64_t as = x.strides()[axis];
  dispatch_bits(x.dtype(), "gather", [&](auto tag) {
    using U = decltype(tag);
    const U* xp = static_cast<const U*>(x.raw_data());
    U* op = static_cast<U*>(out.raw_data());
    walk_axis_zeroed(index.shape(), x.strides(), axis,
                     [&](int64_t flat, int64_t off) { op[flat] = xp[off + idx[size_t(flat)] * as]; });
  });
}

void scatter_add(Tensor& gx, int axis, const Tensor& index, const Tensor& g_in) {
  Tensor g = g_in.contiguous();
  std::vector<int64_t> idx = index_values(index);
  int64_t as = gx.strides()[axis];
  dispatch_float(gx.dtype(), "scatter_add", [&](auto tag) {
    using T = decltype(tag);
    T* gp = gx.data<T>();
    const T* sp = g.data<T>();
    walk_axis_zeroed(index.shape(), gx.strides(), axis,
                     [&](int64_t flat, int64_t off) { gp[off + idx[size_t(flat)] * as] += sp[flat]; });
  });
}

// x viewed as (outer, size, inner) around axis (x contiguous): out (outer, n, inner).
void index_select(const Tensor& x_in, int axis, const Tensor& index, Tensor& out) {
  Tensor x = x_in.contiguous();
  std::vector<int64_t> idx = index_values(index);
  int64_t outer = 1, inner = 1, size = x.shape()[axis], n = int64_t(idx.size());
  for (int d = 0; d < axis; ++d) outer *= x.shape()[d];
  for (int d = axis + 1; d < x.ndim(); ++d) inner *= x.shape()[d];
  size_t row = size_t(inner) * dtype_size(x.dtype());
  const char* xp = static_cast<const char*>(x.raw_data());
  char* op = static_cast<char*>(out.raw_data());
  int64_t rows = outer * n;
#pragma omp parallel for schedule(static) if (rows * inner >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t o = r / n, j = r % n;
    std::memcpy(op + size_t(r) * row, xp + size_t(o * size + idx[size_t(j)]) * row, row);
  }
}

void index_add(Tensor& gx, int axis, const Tensor& index, const Tensor& g_in) {
  Tensor g = g_in.contiguous();
  std::vector<int64_t> idx = index_values(index);
  int64_t outer = 1, inner = 1, size = gx.shape()[axis], n = int64_t(idx.size());
  for (int d = 0; d < axis; ++d) outer *= gx.shape()[d];
  for (int d = axis + 1; d < gx.ndim(); ++d) inner *= gx.shape()[d];
  dispatch_float(gx.dtype(), "index_add", [&](auto tag) {
    using T = decltype(tag);
    T* gp = gx.data<T>();
    const T* sp = g.data<T>();
    // Different o never touch the same row: parallel over o, serial over j (fixed order).
#pragma omp parallel for schedule(static) if (outer > 1 && outer * n * inner >= kParallelGrain)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < n; ++j) {
        T* dst = gp + (o * size + idx[size_t(j)]) * inner;
        const T* src = sp + (o * n + j) * inner;
        for (int64_t i = 0; i < inner; ++i) dst[i] += src[i];
      }
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) {
  const Shape& s = out.shape();
  Shape cs = broadcast_strides(cond, s), as = broadcast_strides(a, s), bs = broadcast_strides(b, s);
  Shape os = Shape::contiguous_strides(s);
  const uint8_t* cp = static_cast<const uint8_t*>(cond.raw_data());
  dispatch_bits(out.dtype(), "where", [&](auto tag) {
    using U = decltype(tag);
    const U* ap = static_cast<const U*>(a.raw_data());
    const U* bp = static_cast<const U*>(b.raw_data());
    U* op = static_cast<U*>(out.raw_data());
    int64_t n = out.numel();
    if (cs == os && as == os && bs == os) {  // all contiguous, same shape
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
      for (int64_t i = 0; i < n; ++i) op[i] = cp[i] ? ap[i] : bp[i];
      return;
    }
    int nd = s.ndim();
    int64_t ci = nd ? cs[nd - 1] : 0, ai = nd ? as[nd - 1] : 0, bi = nd ? bs[nd - 1] : 0;
    for_each_row<4>(s, {&os, &cs, &as, &bs}, [&](const std::array<int64_t, 4>& off, int64_t len) {
      U* o = op + off[0];
      const uint8_t* c = cp + off[1];
      const U* x = ap + off[2];
      const U* y = bp + off[3];
      for (int64_t i = 0; i < len; ++i) o[i] = c[i * ci] ? x[i * ai] : y[i * bi];
    });
  });
}

void embedding_forward(const Tensor& weight, const std::vector<int64_t>& ids, Tensor& out) {
  if (is_held_int8(weight) && out.dtype() == DType::f32) {  // a table held in int8: q * scale, per row
    const HeldInt8Rows r = held_int8_rows(weight, "embedding");
    float* op = out.data<float>();
    parallel_for_if(int64_t(ids.size()) * r.K >= kParallelGrain, int64_t(ids.size()), [&](int64_t n) {
      const int64_t id = ids[size_t(n)];
      const int8_t* row = r.q + id * r.K;
      for (int64_t j = 0; j < r.K; ++j) op[n * r.K + j] = float(row[j]) * r.scale[id];
    });
    return;
  }
  if (weight.dtype() == DType::bf16 && out.dtype() == DType::f32) {  // a table held in bf16: rows widened
    const int64_t D = weight.size(1);
    const auto* wp = static_cast<const uint16_t*>(weight.raw_data());
    float* op = out.data<float>();
    parallel_for_if(int64_t(ids.size()) * D >= kParallelGrain, int64_t(ids.size()), [&](int64_t n) {
      const uint16_t* row = wp + ids[size_t(n)] * D;
      for (int64_t j = 0; j < D; ++j) op[n * D + j] = from_bf16(row[j]);
    });
    return;
  }
  const size_t row_bytes = size_t(weight.size(1)) * dtype_size(weight.dtype());
  const char* wp = static_cast<const char*>(weight.raw_data());
  char* op = static_cast<char*>(out.raw_data());
  const int64_t N = int64_t(ids.size());
  parallel_for_if(N * weight.size(1) >= kParallelGrain, N, [&](int64_t n) {
    std::memcpy(op + size_t(n) * row_bytes, wp + size_t(ids[size_t(n)]) * row_bytes, row_bytes);
  });
}

void embedding_backward(const Tensor& gy, const std::vector<int64_t>& ids, int64_t padding_idx, Tensor& gw) {
  // out[n] = weight[ids[n]]  ->  dweight[ids[n]] += gy[n] (except the padding row)
  dispatch_float(gy.dtype(), "embedding backward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t D = gw.size(1), N = int64_t(ids.size());
    const T* gp = gy.data<T>();
    T* wp = gw.data<T>();
    constexpr int64_t kTile = 64;
    const int64_t tiles = (D + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (N * D >= kParallelGrain && tiles > 1)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t j0 = t * kTile, j1 = std::min(D, j0 + kTile);
      for (int64_t n = 0; n < N; ++n) {
        const int64_t id = ids[size_t(n)];
        if (id == padding_idx) continue;
        T* dst = wp + id * D;
        const T* src = gp + n * D;
#pragma omp simd
        for (int64_t j = j0; j < j1; ++j) dst[j] += src[j];
      }
    }
  });
}

}  // namespace qkv::kernels
