// Optimizers (qkv/train/optim.h): validation, parameter groups and state; the arithmetic is in
// kernels/cpu/optim.cpp.
#include "qkv/train/optim.h"

#include <cmath>
#include <set>

#include "qkv/io/format/safetensors_reader.h"
#include "qkv/kernels/optim.h"

namespace qkv {

bool is_bias_or_norm(const std::string& name) {
  auto dot = name.rfind('.');
  std::string last = dot == std::string::npos ? name : name.substr(dot + 1);
  std::string owner = dot == std::string::npos ? "" : name.substr(0, dot);
  auto odot = owner.rfind('.');
  std::string module = odot == std::string::npos ? owner : owner.substr(odot + 1);
  if (last == "bias" || last == "b") return true;
  // "...norm1.weight", "...layer_norm.weight", "ln_f.weight", "LayerNorm.gamma"
  auto has = [&](const char* s) { return module.find(s) != std::string::npos; };
  return has("norm") || has("Norm") || module.rfind("ln", 0) == 0;
}

std::vector<ParamGroup> make_param_groups(const std::vector<std::pair<std::string, Tensor>>& named,
                                          const std::function<bool(const std::string&)>& no_decay) {
  ParamGroup decay, plain;
  plain.weight_decay = 0.0;
  for (const auto& [n, t] : named) (no_decay(n) ? plain : decay).params.push_back(t);
  std::vector<ParamGroup> out;
  if (!decay.params.empty()) out.push_back(std::move(decay));
  if (!plain.params.empty()) out.push_back(std::move(plain));
  return out;
}

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr, double weight_decay, const char* op)
    : groups_(std::move(groups)), lr_(lr), op_(op) {
  QKV_CHECK(lr >= 0 && std::isfinite(lr), op, "expected lr >= 0, got ", lr);
  QKV_CHECK(weight_decay >= 0, op, "expected weight_decay >= 0, got ", weight_decay);
  QKV_CHECK(!groups_.empty(), op, "expected at least one parameter group, got none");
  std::set<const TensorImpl*> seen;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    ParamGroup& g = groups_[gi];
    if (!g.lr) g.lr = lr * g.lr_scale;
    if (!g.weight_decay) g.weight_decay = weight_decay;
    QKV_CHECK(*g.lr >= 0 && *g.weight_decay >= 0, op, "group ", gi, ": expected lr >= 0 and weight_decay >= 0, got lr ",
              *g.lr, ", weight_decay ", *g.weight_decay);
    for (size_t i = 0; i < g.params.size(); ++i) {
      const Tensor& p = g.params[i];
      QKV_CHECK(p.defined(), op, "group ", gi, " parameter ", i, " is an undefined tensor");
      QKV_CHECK(p.dtype() == DType::f32 || p.dtype() == DType::f64, op, "group ", gi, " parameter ", i,
                ": expected dtype f32 or f64, got ", p.str());
      QKV_CHECK(p.is_leaf() && p.requires_grad(), op, "group ", gi, " parameter ", i,
                ": expected a leaf tensor with requires_grad, got ", p.str(),
                p.is_leaf() ? " without requires_grad" : " with a grad_fn (not a leaf)");
      QKV_CHECK(p.is_contiguous(), op, "group ", gi, " parameter ", i, ": expected a contiguous tensor, got ",
                p.str(), " with non-contiguous strides");
      QKV_CHECK(seen.insert(&p.impl()).second, op, "group ", gi, " parameter ", i, " ", p.str(),
                " appears more than once");
    }
  }
  state_.resize(seen.size());
}

std::vector<Tensor> Optimizer::params() const {
  std::vector<Tensor> out;
  for (const auto& g : groups_) out.insert(out.end(), g.params.begin(), g.params.end());
  return out;
}

void Optimizer::zero_grad() {
  for (auto& g : groups_)
    for (auto& p : g.params) p.zero_grad();
}

void Optimizer::set_lr(double lr) {
  QKV_CHECK(lr >= 0 && std::isfinite(lr), std::string(op_) + ".set_lr", "expected a finite lr >= 0, got ", lr);
  lr_ = lr;
  for (auto& g : groups_) g.lr = lr * g.lr_scale;
}

void Optimizer::for_each_grad(const std::function<void(const ParamGroup&, Tensor&, const Tensor&, size_t)>& fn) {
  size_t index = 0;
  for (auto& g : groups_) {
    for (auto& p : g.params) {
      Tensor grad = p.grad();
      if (grad.defined()) {
        QKV_CHECK(grad.shape() == p.shape() && grad.dtype() == p.dtype(), std::string(op_) + ".step", "parameter ",
                  index, " is ", p.str(), " but its grad is ", grad.str());
        fn(g, p, grad.contiguous(), index);
      }
      ++index;
    }
  }
}

std::map<std::string, Tensor> Optimizer::state_entries(bool copy) const {
  std::map<std::string, Tensor> out;
  for (size_t i = 0; i < state_.size(); ++i) {
    const State& s = state_[i];
    if (s.step == 0) continue;
    std::string key = "param." + std::to_string(i) + ".";
    out[key + "step"] = Tensor::scalar(double(s.step), DType::i64);
    for (const auto& [n, t] : s.buffers) out[key + n] = copy ? t.clone() : t;
  }
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    std::string key = "group." + std::to_string(gi) + ".";
    out[key + "lr"] = Tensor::scalar(*groups_[gi].lr, DType::f64);
    out[key + "weight_decay"] = Tensor::scalar(*groups_[gi].weight_decay, DType::f64);
  }
  out["lr"] = Tensor::scalar(lr_, DType::f64);
  return out;
}

std::map<std::string, Tensor> Optimizer::state_dict() const { return state_entries(true); }
std::map<std::string, Tensor> Optimizer::state_dict_view() const { return state_entries(false); }

// The entries load_state_dict reads: their names, each one's shape and dtype, a scalar's value, and
// a buffer's values written into a new tensor of its shape.
struct Optimizer::Entries {
  std::vector<std::string> names;
  std::function<std::pair<Shape, DType>(const std::string&)> kind;
  std::function<double(const std::string&)> scalar;
  std::function<void(const std::string&, Tensor&)> fill;
};

void Optimizer::load_state_dict(const std::map<std::string, Tensor>& state) {
  Entries e;
  for (const auto& [k, t] : state) e.names.push_back(k);
  e.kind = [&](const std::string& k) { return std::make_pair(state.at(k).shape(), state.at(k).dtype()); };
  e.scalar = [&](const std::string& k) { return state.at(k).item(); };
  e.fill = [&](const std::string& k, Tensor& dst) { dst.copy_from(state.at(k)); };
  load_entries(e);
}

void Optimizer::load_state_dict(const safetensors::Reader& file, const std::string& prefix) {
  Entries e;
  for (const std::string& k : file.names())
    if (k.rfind(prefix, 0) == 0) e.names.push_back(k.substr(prefix.size()));
  e.kind = [&](const std::string& k) { return std::make_pair(file.shape(prefix + k), file.dtype(prefix + k)); };
  e.scalar = [&](const std::string& k) { return file.read(prefix + k).item(); };
  e.fill = [&](const std::string& k, Tensor& dst) { file.read_into(prefix + k, dst); };
  load_entries(e);
}

void Optimizer::load_entries(const Entries& entries) {
  const std::string where = std::string(op_) + ".load_state_dict";
  const std::set<std::string> present(entries.names.begin(), entries.names.end());
  std::vector<Tensor> ps = params();
  std::set<std::string> used;
  auto expect = [&](const std::string& key, const Shape& shape, DType dt, const std::string& what) {
    QKV_CHECK(present.count(key), where, "missing entry '", key, "'");
    const auto [s, d] = entries.kind(key);
    QKV_CHECK(s == shape && d == dt, where, "entry '", key, "': expected ", what, ", got ", dtype_name(d), s.str());
    used.insert(key);
  };
  auto scalar = [&](const std::string& key, DType dt) -> double {
    QKV_CHECK(present.count(key), where, "missing entry '", key, "'");
    const auto [s, d] = entries.kind(key);
    QKV_CHECK(s.numel() == 1 && d == dt, where, "entry '", key, "': expected a ", dtype_name(dt), " scalar, got ",
              dtype_name(d), s.str());
    used.insert(key);
    return entries.scalar(key);
  };
  // Check everything before changing anything: names, shapes, dtypes and the scalars' values.
  std::vector<int64_t> steps(ps.size(), 0);
  for (size_t i = 0; i < ps.size(); ++i) {
    std::string key = "param." + std::to_string(i) + ".";
    if (!present.count(key + "step")) {  // this parameter has not stepped yet: no buffers either
      for (const std::string& n : buffer_names())
        QKV_CHECK(!present.count(key + n), where, "missing entry '", key, "step' (its '", key, n, "' is there)");
      continue;
    }
    double step = scalar(key + "step", DType::i64);
    QKV_CHECK(step >= 1, where, "entry '", key, "step': expected >= 1, got ", step);
    steps[i] = int64_t(step);
    for (const std::string& n : buffer_names())
      expect(key + n, ps[i].shape(), ps[i].dtype(), ps[i].str() + " (like parameter " + std::to_string(i) + ")");
  }
  std::vector<std::pair<double, double>> hyper;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    std::string key = "group." + std::to_string(gi) + ".";
    hyper.emplace_back(scalar(key + "lr", DType::f64), scalar(key + "weight_decay", DType::f64));
  }
  double lr = scalar("lr", DType::f64);
  for (const std::string& k : entries.names)
    QKV_CHECK(used.count(k), where, "unexpected entry '", k, "' (", ps.size(), " parameters in ", groups_.size(),
              " groups, buffers of ", name(), ")");
  // Then the buffers, each into its new tensor; a read that fails leaves the state as it was.
  std::vector<State> fresh(ps.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    fresh[i].step = steps[i];
    if (steps[i] == 0) continue;
    for (const std::string& n : buffer_names()) {
      Tensor t = Tensor::empty(ps[i].shape(), ps[i].dtype());
      entries.fill("param." + std::to_string(i) + "." + n, t);
      fresh[i].buffers[n] = std::move(t);
    }
  }
  state_ = std::move(fresh);
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    groups_[gi].lr = hyper[gi].first;
    groups_[gi].weight_decay = hyper[gi].second;
  }
  lr_ = lr;
}

// ---- SGD ----

SGD::SGD(std::vector<ParamGroup> groups, double lr, double momentum, double dampening, bool nesterov,
         double weight_decay)
    : Optimizer(std::move(groups), lr, weight_decay, "SGD"),
      momentum_(momentum), dampening_(dampening), nesterov_(nesterov) {
  QKV_CHECK(momentum >= 0, "SGD", "expected momentum >= 0, got ", momentum);
  QKV_CHECK(!nesterov || (momentum > 0 && dampening == 0), "SGD",
            "Nesterov momentum needs momentum > 0 and dampening 0, got momentum ", momentum, ", dampening ",
            dampening);
}

std::vector<std::string> SGD::buffer_names() const {
  if (momentum_ == 0) return {};
  return {"momentum_buffer"};
}

void SGD::step() {
  for_each_grad([&](const ParamGroup& g, Tensor& p, const Tensor& grad, size_t i) {
    State& s = state(i);
    kernels::SgdStep h;
    h.lr = *g.lr;
    h.momentum = momentum_;
    h.dampening = dampening_;
    h.weight_decay = *g.weight_decay;
    h.nesterov = nesterov_;
    h.first = s.step == 0;
    Tensor none, *buf = &none;
    if (momentum_ != 0) {
      buf = &s.buffers["momentum_buffer"];
      if (!buf->defined()) *buf = Tensor::empty_like(p);  // written on the first step
    }
    kernels::sgd_update(p, grad, *buf, h);
    ++s.step;
  });
}

// ---- Adam / AdamW ----

Adam::Adam(std::vector<ParamGroup> groups, double lr, std::pair<double, double> betas, double eps,
           double weight_decay, bool amsgrad)
    : Adam(std::move(groups), lr, betas, eps, weight_decay, amsgrad, false) {}

Adam::Adam(std::vector<ParamGroup> groups, double lr, std::pair<double, double> betas, double eps,
           double weight_decay, bool amsgrad, bool decoupled)
    : Optimizer(std::move(groups), lr, weight_decay, decoupled ? "AdamW" : "Adam"),
      beta1_(betas.first), beta2_(betas.second), eps_(eps), amsgrad_(amsgrad), decoupled_(decoupled) {
  const char* op = decoupled ? "AdamW" : "Adam";
  QKV_CHECK(beta1_ >= 0 && beta1_ < 1 && beta2_ >= 0 && beta2_ < 1, op, "expected betas in [0, 1), got (", beta1_,
            ", ", beta2_, ")");
  QKV_CHECK(eps >= 0, op, "expected eps >= 0, got ", eps);
}

std::vector<std::string> Adam::buffer_names() const {
  if (amsgrad_) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}

void Adam::step() {
  // Every parameter's update in one parallel region (kernels::adam_update_all).
  // Every grad is checked (for_each_grad) before any parameter or step count changes.
  std::vector<Tensor> grads;  // contiguous grads, alive until the updates ran
  std::vector<State*> states;
  std::vector<kernels::AdamUpdate> updates;
  for_each_grad([&](const ParamGroup& g, Tensor& p, const Tensor& grad, size_t i) {
    State& s = state(i);
    if (s.step == 0)
      for (const std::string& n : buffer_names()) s.buffers[n] = Tensor::zeros_like(p);
    kernels::AdamStep h;
    h.lr = *g.lr;
    h.beta1 = beta1_;
    h.beta2 = beta2_;
    h.eps = eps_;
    h.weight_decay = *g.weight_decay;
    h.step = s.step + 1;
    h.decoupled = decoupled_;
    h.amsgrad = amsgrad_;
    grads.push_back(grad);
    states.push_back(&s);
    updates.push_back({&p, nullptr, &s.buffers["exp_avg"], &s.buffers["exp_avg_sq"],
                       amsgrad_ ? &s.buffers["max_exp_avg_sq"] : nullptr, h});
  });
  for (size_t i = 0; i < updates.size(); ++i) {
    updates[i].g = &grads[i];  // grads no longer grows
    ++states[i]->step;
  }
  kernels::adam_update_all(updates);
}

}  // namespace qkv
