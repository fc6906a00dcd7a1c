// Learning-rate schedules (qkv/train/schedule.h).
#include "qkv/train/schedule.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <numbers>
#include <set>

#include "qkv/util/error.h"

namespace qkv {
namespace {

void check_step(int64_t step, const char* op) {
  QKV_CHECK(step >= 1, op, ".lr_at: expected step >= 1 (the first update is step 1), got ", step);
}

}  // namespace

ConstantLR::ConstantLR(double lr) : lr_(lr) {
  QKV_CHECK(lr >= 0 && std::isfinite(lr), "ConstantLR", "expected a finite lr >= 0, got ", lr);
}
double ConstantLR::lr_at(int64_t step) const {
  check_step(step, "ConstantLR");
  return lr_;
}
std::string ConstantLR::describe() const { return detail::cat("constant(lr=", lr_, ")"); }

NoamSchedule::NoamSchedule(int64_t d_model, int64_t warmup, double factor)
    : d_model_(d_model), warmup_(warmup), factor_(factor) {
  QKV_CHECK(d_model >= 1 && warmup >= 1 && factor > 0, "NoamSchedule",
            "expected d_model >= 1, warmup >= 1, factor > 0, got d_model ", d_model, ", warmup ", warmup,
            ", factor ", factor);
}
double NoamSchedule::lr_at(int64_t step) const {
  check_step(step, "NoamSchedule");
  double s = double(step);
  return factor_ * std::pow(double(d_model_), -0.5) * std::min(std::pow(s, -0.5), s * std::pow(double(warmup_), -1.5));
}
std::string NoamSchedule::describe() const {
  return detail::cat("noam(d_model=", d_model_, ", warmup=", warmup_, ", factor=", factor_, ")");
}

WarmupCosine::WarmupCosine(double base_lr, int64_t warmup, int64_t total, double min_lr)
    : base_(base_lr), min_(min_lr), warmup_(warmup), total_(total) {
  QKV_CHECK(base_lr >= 0 && min_lr >= 0 && min_lr <= base_lr, "WarmupCosine",
            "expected 0 <= min_lr <= base_lr, got base_lr ", base_lr, ", min_lr ", min_lr);
  QKV_CHECK(warmup >= 0 && total > warmup, "WarmupCosine", "expected 0 <= warmup < total, got warmup ", warmup,
            ", total ", total);
}
double WarmupCosine::lr_at(int64_t step) const {
  check_step(step, "WarmupCosine");
  if (step <= warmup_) return base_ * double(step) / double(warmup_);
  if (step >= total_) return min_;
  double progress = double(step - warmup_) / double(total_ - warmup_);
  return min_ + (base_ - min_) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}
std::string WarmupCosine::describe() const {
  return detail::cat("warmup_cosine(lr=", base_, ", warmup=", warmup_, ", total=", total_, ", min_lr=", min_, ")");
}

InverseSqrt::InverseSqrt(double base_lr, int64_t warmup) : base_(base_lr), warmup_(warmup) {
  QKV_CHECK(base_lr >= 0 && warmup >= 1, "InverseSqrt", "expected lr >= 0 and warmup >= 1, got lr ", base_lr,
            ", warmup ", warmup);
}
double InverseSqrt::lr_at(int64_t step) const {
  check_step(step, "InverseSqrt");
  if (step <= warmup_) return base_ * double(step) / double(warmup_);
  return base_ * std::sqrt(double(warmup_) / double(step));
}
std::string InverseSqrt::describe() const {
  return detail::cat("inverse_sqrt(lr=", base_, ", warmup=", warmup_, ")");
}

std::unique_ptr<LrSchedule> make_schedule(const nlohmann::json& c) {
  const char* op = "make_schedule";
  QKV_CHECK(c.is_object(), op, "expected a JSON object, got ", c.dump());
  auto num = [&](const char* key) -> double {
    QKV_CHECK(c.contains(key) && c[key].is_number(), op, "field '", key, "': expected a number, got ",
              c.contains(key) ? c[key].dump() : std::string("nothing"), " in ", c.dump());
    return c[key].get<double>();
  };
  auto integer = [&](const char* key) -> int64_t {
    QKV_CHECK(c.contains(key) && c[key].is_number_integer(), op, "field '", key, "': expected an integer, got ",
              c.contains(key) ? c[key].dump() : std::string("nothing"), " in ", c.dump());
    return c[key].get<int64_t>();
  };
  QKV_CHECK(c.contains("type") && c["type"].is_string(), op, "field 'type': expected a string, got ",
            c.contains("type") ? c["type"].dump() : std::string("nothing"));
  std::string type = c["type"];
  // Every key must mean something to this type: a misspelt "warmpu" is an error, not a default.
  const std::map<std::string, std::set<std::string>> keys = {
      {"constant", {"lr"}}, {"noam", {"d_model", "warmup", "factor"}},
      {"warmup_cosine", {"lr", "warmup", "total", "min_lr"}}, {"inverse_sqrt", {"lr", "warmup"}}};
  if (auto k = keys.find(type); k != keys.end())
    for (auto& [key, v] : c.items())
      QKV_CHECK(key == "type" || k->second.count(key), op, "field '", key, "': unknown for a ", type,
                " schedule (expected type", [&] {
                  std::string all;
                  for (auto& a : k->second) all += ", " + a;
                  return all;
                }(), ")");
  if (type == "constant") return std::make_unique<ConstantLR>(num("lr"));
  if (type == "noam")
    return std::make_unique<NoamSchedule>(integer("d_model"), integer("warmup"),
                                          c.contains("factor") ? num("factor") : 1.0);
  if (type == "warmup_cosine")
    return std::make_unique<WarmupCosine>(num("lr"), integer("warmup"), integer("total"),
                                          c.contains("min_lr") ? num("min_lr") : 0.0);
  if (type == "inverse_sqrt") return std::make_unique<InverseSqrt>(num("lr"), integer("warmup"));
  fail(op, "field 'type': expected one of constant, noam, warmup_cosine, inverse_sqrt, got '", type, "'");
}

}  // namespace qkv
