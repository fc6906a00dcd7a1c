// qkv/train/nonfinite.h - what a training step does when its loss or gradients hold NaN or Inf.
//
// The trainer computes the global gradient norm every step (clipping needs it anyway); a
// non-finite norm or loss is the cheap detector, so a blow-up is caught in the step it appears,
// before the optimizer writes it into the weights and moments. The policy (config `train.on_nonfinite`):
//   stop  (default) throw, naming the step, the loss, the norm and the first parameter (in the
//         model's order) whose gradient is non-finite; the weights are those of the step before,
//         and the last checkpoint on disk is untouched.
//   skip  drop the step: no update, the step is not counted (the schedule and step numbers go on
//         as if the batch had not been drawn), a warning on stderr; more than
//         `train.max_nonfinite_skips` consecutive skips stop the run as `stop` would.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "qkv/tensor/tensor.h"

namespace qkv::train {

enum class NonFinitePolicy { stop, skip };

// "stop" | "skip"; anything else throws naming `where` (the config field).
NonFinitePolicy parse_nonfinite_policy(const std::string& s, const std::string& where);
const char* nonfinite_policy_name(NonFinitePolicy p);

// The name of the first parameter whose gradient holds a NaN or an Inf, "" if none does.
std::string first_nonfinite_grad(const std::vector<std::pair<std::string, Tensor>>& named_params);

// "step 37: non-finite loss nan (gradient norm nan; first non-finite gradient: 'dec.fc1.weight')".
std::string describe_nonfinite_step(int64_t step, double loss, double grad_norm,
                                    const std::vector<std::pair<std::string, Tensor>>& named_params);

}  // namespace qkv::train
