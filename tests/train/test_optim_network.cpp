// End to end against torch (tools/refs/train_optim.py): the two-layer network
// x (16, 8) -> linear(8, 32) -> tanh -> linear(32, 4) -> mse_loss vs y (16, 4), trained for 20
// steps by qkv's own forward, backward, clipping, schedule and optimizer from torch's initial
// parameters; every parameter is compared after every step.
// Tolerance: f32 rtol 1e-5 / atol 1e-6 for the parameters, the losses and the raw gradients.
// The gradients differ from torch's by float rounding in the GEMMs (different summation order),
// and each step feeds that into the next; the check is that this stays below 1e-5 relative.
#include <gtest/gtest.h>

#include "optim_cases.h"
#include "qkv/autograd/node.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/loss.h"
#include "qkv/ops/matmul.h"
#include "qkv/train/clip.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

TEST(OptimNetwork, TwentyStepsMatchTorchAtEveryStep) {
  RefFile ref("train_optim");
  const Tensor x = ref.get("net", "x"), y = ref.get("net", "y");  // (16, 8), (16, 4)
  int cases = 0;
  for (const auto& c : ref.cases()) {
    auto p = ref.params(c);
    if (!p.contains("opt") || p.contains("dtype")) continue;
    SCOPED_TRACE(c);
    std::map<std::string, Tensor> w;
    for (const auto& n : kNetParams) w[n] = ref.get("net", n).clone().set_requires_grad(true);
    auto opt = make_optimizer(p, net_groups(w["w1"], w["b1"], w["w2"], w["b2"]));
    auto sched = case_schedule(p);
    const std::vector<Tensor> all = {w["w1"], w["w2"], w["b1"], w["b2"]};
    for (int s = 0; s < p["steps"].get<int>(); ++s) {
      SCOPED_TRACE("step " + std::to_string(s + 1));
      opt->zero_grad();
      Tensor h = tanh(linear(x, w["w1"], w["b1"]));  // (16, 32)
      Tensor out = linear(h, w["w2"], w["b2"]);      // (16, 4)
      Tensor loss = mse_loss(out, y);
      EXPECT_NEAR(loss.item(), ref.get(c, "loss").data<double>()[s], 1e-5 * loss.item());
      backward(loss);
      for (const auto& n : kNetParams) EXPECT_CLOSE(w[n].grad(), row(ref.get(c, "g_" + n), s), kF32) << "grad " << n;
      if (!p["clip"].is_null()) clip_grad_norm(all, p["clip"].get<double>());
      if (sched) opt->set_lr(sched->lr_at(s + 1));
      opt->step();
      for (const auto& n : kNetParams) EXPECT_CLOSE(w[n], row(ref.get(c, "p_" + n), s), kF32) << n;
    }
    ++cases;
  }
  EXPECT_EQ(cases, 15);
}
