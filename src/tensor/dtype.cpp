#include "qkv/tensor/dtype.h"

#include "qkv/util/error.h"

namespace qkv {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
    case DType::boolean: return 1;
    case DType::bf16: return 2;
    case DType::i8: return 1;
  }
  fail("dtype_size", "unknown dtype ", int(t));
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
    case DType::boolean: return "bool";
    case DType::bf16: return "bf16";
    case DType::i8: return "i8";
  }
  return "?";
}

bool is_floating(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::bf16; }
bool is_integral(DType t) { return !is_floating(t); }

}  // namespace qkv
