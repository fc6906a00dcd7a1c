// qkv/tensor/dtype.h - element types. f32 computes, f64 serves gradient checks, i32/i64 index,
// u8/bool mask; bf16 has its slot so a dispatch can accept it later (and throws until then).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace qkv {

enum class DType : uint8_t { f32, f64, i32, i64, u8, boolean, bf16 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "f32", "i64", ...
bool is_floating(DType t);        // f32, f64, bf16
bool is_integral(DType t);        // i32, i64, u8, bool

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::u8; }
template <> constexpr DType dtype_of<bool>() { return DType::boolean; }

}  // namespace qkv
