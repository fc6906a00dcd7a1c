// qkv/tensor/dtype.h - element types. f32 computes, f64 serves gradient checks, i32/i64 index,
// u8/bool mask; bf16 and i8 hold inference weights (nn::Module::hold_weights_in_bf16 / _in_int8:
// i8 only as a weight held in int8, tensor/held_int8.h), which general ops refuse.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace qkv {

enum class DType : uint8_t { f32, f64, i32, i64, u8, boolean, bf16, i8 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "f32", "i64", ...
bool is_floating(DType t);        // f32, f64, bf16
bool is_integral(DType t);        // i32, i64, u8, bool, i8

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::u8; }
template <> constexpr DType dtype_of<bool>() { return DType::boolean; }

}  // namespace qkv
