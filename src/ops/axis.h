// src/ops/axis.h - private to ops/: axis normalisation with the error message the ops share.
#pragma once
#include <algorithm>

#include "qkv/tensor/tensor.h"
#include "qkv/util/error.h"

namespace qkv::detail {

// Normalises a possibly negative axis of x; the error names the op, the axis and x's shape.
inline int axis_of(const Tensor& x, int axis, const char* op) {
  int nd = x.ndim(), a = axis < 0 ? axis + nd : axis;
  QKV_CHECK(a >= 0 && a < std::max(nd, 1), op, "axis ", axis, " is out of range for x ", x.shape().str(),
            " (valid: ", -std::max(nd, 1), " to ", std::max(nd, 1) - 1, ")");
  return a;
}

}  // namespace qkv::detail
