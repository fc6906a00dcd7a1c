// train::make_optimizer: an optimizer from its config section.
#include <nlohmann/json.hpp>

#include "qkv/nn/module.h"
#include "qkv/train/optim.h"
#include "qkv/util/config.h"
#include "qkv/util/error.h"

namespace qkv {

std::unique_ptr<Optimizer> make_optimizer(const nlohmann::json& cfg, const std::string& where, nn::Module& model) {
  ConfigReader r(cfg, where, "optimizer");
  std::string type = r.string("type", "adam");
  double lr = r.number("lr", 1e-3), wd = r.number("weight_decay", type == "adamw" ? 0.01 : 0.0);
  std::pair<double, double> betas{0.9, 0.98};
  if (r.has("betas")) {
    auto b = r.raw("betas");
    QKV_CHECK(b.is_array() && b.size() == 2 && b[0].is_number() && b[1].is_number(), r.where("betas"),
              "expected [beta1, beta2]");
    betas = {b[0].get<double>(), b[1].get<double>()};
  }
  double eps = r.number("eps", 1e-9), momentum = r.number("momentum", 0.0);
  r.finish();
  QKV_CHECK(type == "adam" || type == "adamw" || type == "sgd", r.where("type"), "expected adam, adamw or sgd, got '",
            type, "'");
  auto groups = make_param_groups(model.named_parameters(), is_bias_or_norm);
  try {  // the optimizers check their own values (lr >= 0, betas in [0, 1), ...): say which file
    if (type == "adam") return std::make_unique<Adam>(groups, lr, betas, eps, wd);
    if (type == "adamw") return std::make_unique<AdamW>(groups, lr, betas, eps, wd);
    return std::make_unique<SGD>(groups, lr, momentum, 0.0, false, wd);
  } catch (const Error& e) {
    fail(where, "section 'optimizer': ", e.what());
  }
}

void check_optimizer_early(const nlohmann::json& cfg, const std::string& where) {
  struct StandIn : nn::Module {
    StandIn() { register_parameter("weight", Tensor::zeros({1})); }
  } model;
  make_optimizer(cfg, where, model);
}

}  // namespace qkv
