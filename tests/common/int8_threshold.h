// Sets kernels::set_int8_min_weight_elements (which weights take the int8 form) for one scope,
// then restores it, also after a failed assertion.
#pragma once
#include <cstdint>

#include "qkv/kernels/int8.h"

namespace qkv::testing {

class Int8Threshold {
 public:
  explicit Int8Threshold(int64_t n) : saved_(kernels::int8_min_weight_elements()) {
    kernels::set_int8_min_weight_elements(n);
  }
  ~Int8Threshold() { kernels::set_int8_min_weight_elements(saved_); }
  Int8Threshold(const Int8Threshold&) = delete;
  Int8Threshold& operator=(const Int8Threshold&) = delete;

 private:
  int64_t saved_;
};

}  // namespace qkv::testing
