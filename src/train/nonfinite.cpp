#include "qkv/train/nonfinite.h"

#include <cmath>
#include <sstream>

#include "qkv/kernels/optim.h"
#include "qkv/util/error.h"

namespace qkv::train {

NonFinitePolicy parse_nonfinite_policy(const std::string& s, const std::string& where) {
  if (s == "stop") return NonFinitePolicy::stop;
  if (s == "skip") return NonFinitePolicy::skip;
  fail(where, "expected \"stop\" or \"skip\", got \"", s, "\"");
}

const char* nonfinite_policy_name(NonFinitePolicy p) { return p == NonFinitePolicy::stop ? "stop" : "skip"; }

std::string first_nonfinite_grad(const std::vector<std::pair<std::string, Tensor>>& named_params) {
  for (const auto& [name, p] : named_params) {
    const Tensor g = p.grad();
    // A sum of squares in double is finite for every finite f32/f64 gradient (no overflow below
    // 1e154 per element), so a non-finite one means a NaN or Inf inside.
    if (g.defined() && !std::isfinite(kernels::sum_squares_deterministic(g))) return name;
  }
  return "";
}

std::string describe_nonfinite_step(int64_t step, double loss, double grad_norm,
                                    const std::vector<std::pair<std::string, Tensor>>& named_params) {
  std::ostringstream os;
  os << "step " << step << ": non-finite " << (std::isfinite(loss) ? "gradients" : "loss") << " (loss " << loss
     << ", gradient norm " << grad_norm << "; ";
  const std::string first = first_nonfinite_grad(named_params);
  if (first.empty()) os << "every parameter's gradient is finite)";
  else os << "first parameter with a non-finite gradient: '" << first << "')";
  return os.str();
}

}  // namespace qkv::train
