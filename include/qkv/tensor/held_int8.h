// qkv/tensor/held_int8.h - weights held in int8 (nn::Module::hold_weights_in_int8): the layout of
// their memory, for the layers that read them.
//
// A group of weights held together ((N_i, K) each, the same K; a layer's query, key and value
// projections, or one weight alone) lives in one storage: a 64-byte header, then every weight's
// rows quantized to s8 one after another ((sum N_i, K) row-major: what the int8 rows kernel and
// oneDNN read), then one f32 scale per row, then one int32 zero-point sum per row (kernels/int8.h's
// scheme: w[n, k] ~ q[n, k] * scale[n], zero_point_sum[n] = 128 sum_k q[n, k]). Each weight is a
// tensor of dtype i8 viewing its rows; general ops refuse the dtype, so nothing reads the values
// as integers by mistake. This layer only lays the memory out: nn fills it (kernels'
// quantization rule) and kernels multiply with it.
#pragma once
#include <cstdint>
#include <memory>

#include "qkv/tensor/tensor.h"

namespace qkv {

struct HeldInt8Rows {
  int8_t* q = nullptr;                // (rows, K), row-major
  float* scale = nullptr;             // (rows)
  int32_t* zero_point_sum = nullptr;  // (rows)
  int64_t rows = 0, K = 0;
};

// A zeroed storage for `rows` rows of K values in that layout (zero rows: scale 0, sums 0).
std::shared_ptr<Storage> held_int8_storage(int64_t rows, int64_t K);
// The tensor of `n` rows from row `first` of such a storage: dtype i8, (n, K), contiguous.
Tensor held_int8_tensor(const std::shared_ptr<Storage>& storage, int64_t first, int64_t n);
// The parts of a held weight's rows (w: a tensor from held_int8_tensor), or an error naming `who`
// for any other tensor.
HeldInt8Rows held_int8_rows(const Tensor& w, const char* who);
// True for a tensor of dtype i8 (only held weights have it).
inline bool is_held_int8(const Tensor& w) { return w.defined() && w.dtype() == DType::i8; }
// dst's rows, scales and sums <- src's (two held weights of one shape).
void copy_held_int8(const Tensor& dst, const Tensor& src);
// The values a held weight stands for: (N, K) f32, q[n, k] * scale[n] (save(), fallbacks).
Tensor dequantize_held_int8(const Tensor& w);

}  // namespace qkv
