// qkv/train/schedule.h - learning-rate schedules: lr_at(step) is the learning rate for update
// number `step`, counting from 1 (the first optimizer step uses lr_at(1)). Pure functions of
// the step, so a resumed run needs only the step count.
//
//   Noam (Vaswani et al. 2017, eq. 3): factor * d_model^-0.5 * min(s^-0.5, s * warmup^-1.5)
//   WarmupCosine: base * s / warmup for s <= warmup, then
//                 min + (base - min) * (1 + cos(pi * (s - warmup) / (total - warmup))) / 2,
//                 and min after `total` steps
//   InverseSqrt (fairseq): base * s / warmup for s <= warmup, then base * sqrt(warmup / s)
//   Constant: base
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace qkv {

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  virtual double lr_at(int64_t step) const = 0;  // step >= 1
  virtual std::string describe() const = 0;      // e.g. "noam(d_model=512, warmup=4000, factor=1)"
};

class ConstantLR : public LrSchedule {
 public:
  explicit ConstantLR(double lr);
  double lr_at(int64_t step) const override;
  std::string describe() const override;

 private:
  double lr_;
};

class NoamSchedule : public LrSchedule {
 public:
  NoamSchedule(int64_t d_model, int64_t warmup, double factor = 1.0);
  double lr_at(int64_t step) const override;
  std::string describe() const override;

 private:
  int64_t d_model_, warmup_;
  double factor_;
};

class WarmupCosine : public LrSchedule {
 public:
  WarmupCosine(double base_lr, int64_t warmup, int64_t total, double min_lr = 0.0);
  double lr_at(int64_t step) const override;
  std::string describe() const override;

 private:
  double base_, min_;
  int64_t warmup_, total_;
};

class InverseSqrt : public LrSchedule {
 public:
  InverseSqrt(double base_lr, int64_t warmup);
  double lr_at(int64_t step) const override;
  std::string describe() const override;

 private:
  double base_;
  int64_t warmup_;
};

// From a config object: {"type": "noam", "d_model": 512, "warmup": 4000, "factor": 1.0},
// {"type": "warmup_cosine", "lr": .., "warmup": .., "total": .., "min_lr": 0},
// {"type": "inverse_sqrt", "lr": .., "warmup": ..}, {"type": "constant", "lr": ..}.
// Unknown types or missing fields throw naming the field.
std::unique_ptr<LrSchedule> make_schedule(const nlohmann::json& config);

}  // namespace qkv
