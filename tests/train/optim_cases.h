// tests/train/optim_cases.h - builds the optimizers, groups and schedules of the cases in
// tools/refs/train_optim.py from their JSON parameters, and slices per-step reference tensors.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qkv/train/optim.h"
#include "qkv/train/schedule.h"

namespace qkv::testing {

// The network's parameters in the reference's order and its state-index order (groups
// [w1, w2] with decay, [b1, b2] without).
inline const std::vector<std::string> kNetParams = {"w1", "b1", "w2", "b2"};

inline std::vector<ParamGroup> net_groups(const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2) {
  ParamGroup decay{{w1, w2}, std::nullopt, std::nullopt, 1.0};
  ParamGroup plain{{b1, b2}, std::nullopt, 0.0, 1.0};
  return {decay, plain};
}

inline std::unique_ptr<Optimizer> make_optimizer(const nlohmann::json& p, std::vector<ParamGroup> groups) {
  std::string kind = p["opt"];
  double lr = p["lr"], wd = p["weight_decay"];
  if (kind == "sgd")
    return std::make_unique<SGD>(std::move(groups), lr, p["momentum"].get<double>(), p["dampening"].get<double>(),
                                 p["nesterov"].get<bool>(), wd);
  std::pair<double, double> betas{p["beta1"].get<double>(), p["beta2"].get<double>()};
  if (kind == "adam")
    return std::make_unique<Adam>(std::move(groups), lr, betas, p["eps"].get<double>(), wd, p["amsgrad"].get<bool>());
  return std::make_unique<AdamW>(std::move(groups), lr, betas, p["eps"].get<double>(), wd, p["amsgrad"].get<bool>());
}

inline std::unique_ptr<LrSchedule> case_schedule(const nlohmann::json& p) {
  if (!p.contains("schedule") || p["schedule"].is_null()) return nullptr;
  return make_schedule(p["schedule"]);
}

// Row s of a tensor stacked over steps: t[s] as a fresh contiguous tensor.
inline Tensor row(const Tensor& t, int64_t s) {
  Shape shape(std::vector<int64_t>(t.shape().begin() + 1, t.shape().end()));
  Shape strides(std::vector<int64_t>(t.strides().begin() + 1, t.strides().end()));
  return t.as_strided(shape, strides, t.offset() + s * t.strides()[0]).clone();
}

}  // namespace qkv::testing
