// Scope guards for the int8 form's rules (kernels/int8.h): each sets one for a scope and restores
// it at the end, also after a failed assertion.
#pragma once
#include <cstdint>

#include "qkv/kernels/int8.h"

namespace qkv::testing {

// kernels::set_int8_small_weight_min_rows (from which batch a weight that pays only there runs in
// int8; 0: never).
class Int8SmallWeightRows {
 public:
  explicit Int8SmallWeightRows(int64_t rows) : saved_(kernels::int8_small_weight_min_rows()) {
    kernels::set_int8_small_weight_min_rows(rows);
  }
  ~Int8SmallWeightRows() { kernels::set_int8_small_weight_min_rows(saved_); }
  Int8SmallWeightRows(const Int8SmallWeightRows&) = delete;
  Int8SmallWeightRows& operator=(const Int8SmallWeightRows&) = delete;

 private:
  int64_t saved_;
};

// kernels::set_int8_min_weight_elements (which weights always take the int8 form).
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
