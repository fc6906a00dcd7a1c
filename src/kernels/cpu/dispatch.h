// src/kernels/cpu/dispatch.h - private to the CPU kernels: runs fn(float{}) or fn(double{}) for a
// floating dtype, so a kernel body is written once as a template over T; any other dtype throws
// qkv::Error naming the op (an unsupported dtype fails at dispatch).
#pragma once
#include "qkv/tensor/tensor.h"

namespace qkv::kernels {

template <typename Fn>
void dispatch_float(DType t, const char* op, Fn&& fn) {
  switch (t) {
    case DType::f32: fn(float{}); return;
    case DType::f64: fn(double{}); return;
    default: fail(op, "dtype ", dtype_name(t), " is not supported (f32, f64)");
  }
}

}  // namespace qkv::kernels
