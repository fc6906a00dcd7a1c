// qkv/train/optim.h - optimizers over leaf tensors: SGD (momentum, Nesterov), Adam (L2 weight
// decay, AMSGrad) and AdamW (decoupled weight decay), with torch 1.13 semantics
// (torch/optim/{sgd,adam,adamw}.py, the single-tensor paths).
//
// Parameters are leaf tensors that require grad, grouped so that groups can differ in lr and
// weight decay (biases and LayerNorm weights usually skip decay: make_param_groups).
// A parameter whose grad() is undefined is skipped by step(), as in torch (its step count
// does not advance).
//
//   auto groups = make_param_groups(named, [](const std::string& n) { return ends_with_bias(n); });
//   AdamW opt(groups, 1e-3, {0.9, 0.999}, 1e-8, 0.01);
//   for (...) { opt.zero_grad(); backward(loss); clip_grad_norm(params, 1.0);
//               opt.set_lr(schedule.lr_at(step)); opt.step(); }
//
// State for training_state.safetensors: state_dict() names entries by the parameter's index in
// group order, "param.<i>.<name>" (step, exp_avg, exp_avg_sq, max_exp_avg_sq, momentum_buffer),
// plus "group.<g>.lr" and "group.<g>.weight_decay". load_state_dict() into an optimizer built
// over the same parameters continues bit-identically. A checkpoint writer takes state_dict_view()
// (no copies of the moments) and a resume reads the file with load_state_dict(Reader, prefix),
// each buffer read straight into the new state: neither holds a second copy of the moments.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <memory>
#include <nlohmann/json_fwd.hpp>

#include "qkv/tensor/tensor.h"

namespace qkv {

namespace safetensors {
class Reader;
}

struct ParamGroup {
  std::vector<Tensor> params;          // leaves with requires_grad, contiguous, f32 or f64
  std::optional<double> lr;            // unset: the optimizer's lr (filled in at construction)
  std::optional<double> weight_decay;  // unset: the optimizer's weight_decay (filled in)
  double lr_scale = 1.0;               // set_lr(x) gives this group lr = x * lr_scale
};

// Splits named parameters into {decay, no_decay} groups (no_decay gets weight_decay 0);
// an empty group is dropped. The order within each group is the input order.
std::vector<ParamGroup> make_param_groups(const std::vector<std::pair<std::string, Tensor>>& named,
                                          const std::function<bool(const std::string&)>& no_decay);
// The usual predicate: biases and normalisation weights ("bias", "norm", "ln" in the last
// dotted component, e.g. "encoder.layers.0.norm1.weight", "fc.bias", "ln_f.weight").
bool is_bias_or_norm(const std::string& name);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  virtual const char* name() const = 0;
  // Drops every parameter's gradient (torch's set_to_none=True): the next backward writes afresh.
  void zero_grad();

  std::vector<ParamGroup>& groups() { return groups_; }
  const std::vector<ParamGroup>& groups() const { return groups_; }
  std::vector<Tensor> params() const;  // every parameter, in group order (the state index)

  double lr() const { return lr_; }
  void set_lr(double lr);  // every group: lr * group.lr_scale

  std::map<std::string, Tensor> state_dict() const;  // a snapshot: the buffers copied
  // The same entries, the buffers shared with the optimizer (not copied): the next step() changes
  // them. For writing a checkpoint straight away.
  std::map<std::string, Tensor> state_dict_view() const;
  // Throws naming the entry if one is missing, unexpected or misshapen. Everything is checked
  // before anything changes; on an error the optimizer keeps its state.
  void load_state_dict(const std::map<std::string, Tensor>& state);
  // The entries of a file whose names start with prefix (the prefix taken off), each buffer read
  // from the file into its new tensor (only the file's header is held whole). A checksum that
  // does not match throws naming the tensor, and the optimizer keeps its state.
  void load_state_dict(const safetensors::Reader& file, const std::string& prefix);

 protected:
  Optimizer(std::vector<ParamGroup> groups, double lr, double weight_decay, const char* op);

  // Per-parameter state: named buffers shaped like the parameter, and the update count.
  struct State {
    int64_t step = 0;
    std::map<std::string, Tensor> buffers;
  };
  State& state(size_t index) { return state_[index]; }
  // Calls fn(group, param, grad, state index) for each parameter that has a gradient; the grad
  // is checked (shape, dtype) and made contiguous.
  void for_each_grad(const std::function<void(const ParamGroup&, Tensor&, const Tensor&, size_t)>& fn);
  // The buffer names a parameter's state holds once it has taken a step (for load checks).
  virtual std::vector<std::string> buffer_names() const = 0;

 private:
  struct Entries;  // where load_state_dict reads from (optim.cpp)
  void load_entries(const Entries& entries);
  std::map<std::string, Tensor> state_entries(bool copy) const;
  std::vector<ParamGroup> groups_;
  std::vector<State> state_;
  double lr_;
  const char* op_;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> groups, double lr, double momentum = 0, double dampening = 0,
      bool nesterov = false, double weight_decay = 0);
  void step() override;
  const char* name() const override { return "SGD"; }

 protected:
  std::vector<std::string> buffer_names() const override;

 private:
  double momentum_, dampening_;
  bool nesterov_;
};

class Adam : public Optimizer {
 public:
  // weight_decay is L2 (added to the gradient), as torch.optim.Adam.
  Adam(std::vector<ParamGroup> groups, double lr = 1e-3, std::pair<double, double> betas = {0.9, 0.999},
       double eps = 1e-8, double weight_decay = 0, bool amsgrad = false);
  void step() override;
  const char* name() const override { return decoupled_ ? "AdamW" : "Adam"; }

 protected:
  Adam(std::vector<ParamGroup> groups, double lr, std::pair<double, double> betas, double eps,
       double weight_decay, bool amsgrad, bool decoupled);
  std::vector<std::string> buffer_names() const override;

 private:
  double beta1_, beta2_, eps_;
  bool amsgrad_, decoupled_;
};

class AdamW : public Adam {
 public:
  // weight_decay is decoupled (param *= 1 - lr * wd), as torch.optim.AdamW (default 1e-2).
  AdamW(std::vector<ParamGroup> groups, double lr = 1e-3, std::pair<double, double> betas = {0.9, 0.999},
        double eps = 1e-8, double weight_decay = 1e-2, bool amsgrad = false)
      : Adam(std::move(groups), lr, betas, eps, weight_decay, amsgrad, true) {}
};

// Convenience: one group holding every tensor.
inline std::vector<ParamGroup> single_group(std::vector<Tensor> params) {
  return {ParamGroup{std::move(params), std::nullopt, std::nullopt, 1.0}};
}

namespace nn {
class Module;
}
// Adam / AdamW / SGD over a model's parameters from an "optimizer" config section {"type":
// adam|adamw|sgd, "lr", "betas", "eps", "weight_decay", "momentum"} (unknown keys are errors
// naming `where`); biases and LayerNorm weights are never decayed.
std::unique_ptr<Optimizer> make_optimizer(const nlohmann::json& cfg, const std::string& where, nn::Module& model);
// The same section's mistakes found before there is a model (the same reader and checks over one
// stand-in parameter), so that a run names them before it learns a tokenizer or reads data.
void check_optimizer_early(const nlohmann::json& cfg, const std::string& where);

}  // namespace qkv
