// Scope guards for the int8 form's rules (kernels/int8.h): each sets one for a scope and restores
// it at the end, also after a failed assertion.
#pragma once
#include <cstdint>

#include "qkv/kernels/int8.h"

namespace qkv::testing {

template <int64_t (*Get)(), void (*Set)(int64_t)>
class ScopedInt8Setting {
 public:
  explicit ScopedInt8Setting(int64_t value) : saved_(Get()) { Set(value); }
  ~ScopedInt8Setting() { Set(saved_); }
  ScopedInt8Setting(const ScopedInt8Setting&) = delete;
  ScopedInt8Setting& operator=(const ScopedInt8Setting&) = delete;

 private:
  int64_t saved_;
};

// kernels::set_int8_min_weight_elements (which weights always take the int8 form).
using Int8Threshold = ScopedInt8Setting<kernels::int8_min_weight_elements, kernels::set_int8_min_weight_elements>;
// kernels::set_int8_small_weight_min_rows (from which batch a weight that pays only there runs in
// int8; 0: never).
using Int8SmallWeightRows =
    ScopedInt8Setting<kernels::int8_small_weight_min_rows, kernels::set_int8_small_weight_min_rows>;

}  // namespace qkv::testing
