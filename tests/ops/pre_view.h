// tests/ops/pre_view.h - the view of a leaf that a reference applied before the op.
#pragma once
#include <string>

#include "qkv/ops/shape.h"
#include "qkv/tensor/tensor.h"

namespace qkv::testing {

// "t": the transpose of the last two axes; "s2": every second element of the last axis; "": none.
inline Tensor pre_view(const Tensor& t, const std::string& pre) {
  if (pre == "t") return transpose(t, -1, -2);
  if (pre == "s2") return slice(t, -1, 0, kSliceEnd, 2);
  return t;
}

}  // namespace qkv::testing
