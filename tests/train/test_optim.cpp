// train/optim against torch.optim 1.13 (tools/refs/train_optim.py): the optimizer alone, fed
// PyTorch's own gradients at every step, so no error from the network enters.
// Tolerance: f32 rtol 1e-5 / atol 1e-6 on every parameter after every step (the update follows
// torch's float operations one by one; what remains is FMA contraction and the clip
// coefficient's last bit, a few ulp); f64 rtol 1e-10 / atol 1e-12.
#include "qkv/train/optim.h"

#include <gtest/gtest.h>

#include <cmath>

#include "optim_cases.h"
#include "qkv/io/format/safetensors.h"
#include "qkv/train/clip.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

struct Net {
  std::map<std::string, Tensor> p;  // leaves, requires_grad
  std::vector<Tensor> list() const { return {p.at("w1"), p.at("w2"), p.at("b1"), p.at("b2")}; }
};

Net init_net(const RefFile& ref) {
  Net n;
  for (const auto& name : kNetParams) n.p[name] = ref.get("net", name).clone().set_requires_grad(true);
  return n;
}

std::vector<ParamGroup> groups_of(const Net& n) {
  return net_groups(n.p.at("w1"), n.p.at("b1"), n.p.at("w2"), n.p.at("b2"));
}

}  // namespace

TEST(Optim, EveryStepMatchesTorchGivenTorchGradients) {
  RefFile ref("train_optim");
  int cases = 0, clipped = 0;
  for (const auto& c : ref.cases()) {
    auto p = ref.params(c);
    if (!p.contains("opt") || p.contains("dtype")) continue;  // training cases only
    SCOPED_TRACE(c);
    Net net = init_net(ref);
    auto opt = make_optimizer(p, groups_of(net));
    auto sched = case_schedule(p);
    Tensor lrs = ref.get(c, "lr"), norms = ref.get(c, "norm");
    const int steps = p["steps"];
    for (int s = 0; s < steps; ++s) {
      SCOPED_TRACE("step " + std::to_string(s + 1));
      opt->zero_grad();
      for (const auto& n : kNetParams) net.p[n].set_grad(row(ref.get(c, "g_" + n), s));
      if (!p["clip"].is_null()) {
        double max_norm = p["clip"];
        double total = clip_grad_norm(net.list(), max_norm);
        // torch sums in float, qkv in double: the norms agree to float precision.
        EXPECT_NEAR(total, norms.data<double>()[s], 1e-6 * total);
        clipped += total > max_norm;
      }
      if (sched) {
        opt->set_lr(sched->lr_at(s + 1));
        EXPECT_NEAR(opt->lr(), lrs.data<double>()[s], 1e-13 * lrs.data<double>()[s]);
      }
      opt->step();
      for (const auto& n : kNetParams) EXPECT_CLOSE(net.p[n], row(ref.get(c, "p_" + n), s), kF32) << n;
    }
    ++cases;
  }
  EXPECT_EQ(cases, 15);
  EXPECT_GT(clipped, 40);  // the clipping cases really clip
}

TEST(Optim, LargeTensorsTakeTheParallelPath) {
  RefFile ref("train_optim");
  int cases = 0;
  for (const auto& c : ref.cases()) {
    if (c.rfind("big_", 0) != 0) continue;
    SCOPED_TRACE(c);
    auto p = ref.params(c);
    Tensor w = ref.get(c, "p0").clone().set_requires_grad(true);
    auto opt = make_optimizer(p, single_group({w}));
    for (int s = 0; s < 3; ++s) {
      w.set_grad(row(ref.get(c, "grads"), s));
      opt->step();
      EXPECT_CLOSE(w, row(ref.get(c, "after"), s), p["dtype"] == "f64" ? kF64 : kF32) << "step " << s + 1;
    }
    ++cases;
  }
  EXPECT_EQ(cases, 6);
}

// Save after 10 steps (through safetensors bytes, as training_state.safetensors holds it), load
// into a fresh optimizer over a copy of the parameters, continue: bit-identical to 20 in a row.
TEST(Optim, StateDictResumesBitIdentically) {
  RefFile ref("train_optim");
  for (std::string c : {"sgd_nesterov_clip_cosine", "sgd_dampening", "adam_amsgrad_clip", "adamw_noam_clip"}) {
    SCOPED_TRACE(c);
    auto p = ref.params(c);
    auto sched = case_schedule(p);
    auto run = [&](Net& net, Optimizer& opt, int from, int to) {
      for (int s = from; s < to; ++s) {
        opt.zero_grad();
        for (const auto& n : kNetParams) net.p[n].set_grad(row(ref.get(c, "g_" + n), s));
        if (!p["clip"].is_null()) clip_grad_norm(net.list(), p["clip"].get<double>());
        if (sched) opt.set_lr(sched->lr_at(s + 1));
        opt.step();
      }
    };
    Net straight = init_net(ref);
    auto opt1 = make_optimizer(p, groups_of(straight));
    run(straight, *opt1, 0, 20);

    Net first = init_net(ref);
    auto opt2 = make_optimizer(p, groups_of(first));
    run(first, *opt2, 0, 10);
    auto bytes = safetensors::serialize(opt2->state_dict());
    auto saved = safetensors::parse(bytes, "state").tensors;
    EXPECT_TRUE(saved.count("param.0.step"));
    Net resumed;
    for (const auto& [n, t] : first.p) resumed.p[n] = t.clone().set_requires_grad(true);
    auto opt3 = make_optimizer(p, groups_of(resumed));
    opt3->load_state_dict(saved);
    run(resumed, *opt3, 10, 20);
    for (const auto& n : kNetParams) EXPECT_TRUE(bit_equal(resumed.p[n], straight.p[n])) << n;
    // ...and a fresh optimizer without the state does not reproduce it (the test can fail).
    Net cold;
    for (const auto& [n, t] : first.p) cold.p[n] = t.clone().set_requires_grad(true);
    auto opt4 = make_optimizer(p, groups_of(cold));
    run(cold, *opt4, 10, 20);
    EXPECT_FALSE(bit_equal(cold.p["w1"], straight.p["w1"]));
  }
}

TEST(Optim, ParamGroupsAndLrScale) {
  auto named = std::vector<std::pair<std::string, Tensor>>{
      {"enc.layers.0.fc1.weight", Tensor::zeros({2, 2}).set_requires_grad(true)},
      {"enc.layers.0.fc1.bias", Tensor::zeros({2}).set_requires_grad(true)},
      {"enc.layers.0.norm1.weight", Tensor::ones({2}).set_requires_grad(true)},
      {"ln_f.weight", Tensor::ones({2}).set_requires_grad(true)},
      {"wte.weight", Tensor::zeros({3, 2}).set_requires_grad(true)}};
  auto groups = make_param_groups(named, is_bias_or_norm);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].params.size(), 2u);  // fc1.weight, wte.weight
  EXPECT_EQ(groups[1].params.size(), 3u);
  EXPECT_TRUE(groups[0].params[1].same(named[4].second));
  groups[1].lr_scale = 0.5;
  AdamW opt(groups, 1e-3, {0.9, 0.999}, 1e-8, 0.1);
  EXPECT_DOUBLE_EQ(*opt.groups()[0].weight_decay, 0.1);
  EXPECT_DOUBLE_EQ(*opt.groups()[1].weight_decay, 0.0);
  EXPECT_DOUBLE_EQ(*opt.groups()[1].lr, 5e-4);
  opt.set_lr(2e-3);
  EXPECT_DOUBLE_EQ(*opt.groups()[0].lr, 2e-3);
  EXPECT_DOUBLE_EQ(*opt.groups()[1].lr, 1e-3);
  EXPECT_DOUBLE_EQ(opt.lr(), 2e-3);
  // A parameter without a gradient is skipped and keeps no state.
  named[0].second.set_grad(Tensor::ones({2, 2}));
  opt.step();
  auto st = opt.state_dict();
  EXPECT_TRUE(st.count("param.0.exp_avg"));
  EXPECT_FALSE(st.count("param.1.exp_avg"));
  EXPECT_EQ(named[4].second.to_vector<float>(), std::vector<float>(6, 0.f));
  opt.zero_grad();
  EXPECT_FALSE(named[0].second.grad().defined());
}

namespace {
template <typename Fn>
void expect_error(Fn&& fn, std::initializer_list<const char*> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected qkv::Error";
  } catch (const Error& e) {
    std::string m = e.what();
    for (const char* s : parts) EXPECT_NE(m.find(s), std::string::npos) << "'" << s << "' not in: " << m;
  }
}
}  // namespace

TEST(Optim, BadInputsThrowNamingTheOptimizer) {
  Tensor w = Tensor::zeros({2, 3}).set_requires_grad(true);
  Tensor plain = Tensor::zeros({2, 3});
  expect_error([&] { SGD(single_group({plain}), 0.1); }, {"SGD", "requires_grad"});
  expect_error([&] { Adam(single_group({w, w}), 0.1); }, {"Adam", "more than once"});
  expect_error([&] { SGD(single_group({w}), 0.1, 0.9, 0.1, true); }, {"SGD", "Nesterov", "dampening"});
  expect_error([&] { AdamW(single_group({w}), 0.1, {0.9, 1.0}); }, {"AdamW", "betas"});
  expect_error([&] { SGD(single_group({w}), -1.0); }, {"SGD", "lr"});
  expect_error([&] { SGD(single_group({Tensor::zeros({2}, DType::i64)}), 0.1); }, {"SGD", "f32 or f64", "i64"});
  Tensor t = Tensor::zeros({3, 2}).set_requires_grad(true);
  Tensor v = t.as_strided({2, 3}, {1, 2}, 0);  // a transposed view
  v.set_requires_grad(true);
  expect_error([&] { SGD(single_group({v}), 0.1); }, {"SGD", "contiguous"});
  {
    Adam opt(single_group({w}), 0.1);
    w.set_grad(Tensor::zeros({3, 2}));
    expect_error([&] { opt.step(); }, {"Adam.step", "(2, 3)", "(3, 2)"});
    w.set_grad(Tensor::zeros({2, 3}));
    opt.step();
    auto st = opt.state_dict();
    st["param.0.exp_avg"] = Tensor::zeros({3});
    expect_error([&] { opt.load_state_dict(st); }, {"Adam.load_state_dict", "param.0.exp_avg", "f32(2, 3)", "f32(3)"});
    st = opt.state_dict();
    st.erase("param.0.exp_avg_sq");
    expect_error([&] { opt.load_state_dict(st); }, {"missing", "param.0.exp_avg_sq"});
    st = opt.state_dict();
    st["param.7.exp_avg"] = Tensor::zeros({2, 3});
    expect_error([&] { opt.load_state_dict(st); }, {"unexpected", "param.7.exp_avg"});
    expect_error([&] { opt.set_lr(NAN); }, {"Adam.set_lr"});
  }
  {  // a bad grad on the second parameter: the first is not updated and no step is counted
    Tensor a = Tensor::ones({4}).set_requires_grad(true), b = Tensor::ones({2}).set_requires_grad(true);
    Adam opt(single_group({a, b}), 0.1);
    a.set_grad(Tensor::ones({4}));
    b.set_grad(Tensor::ones({3}));
    expect_error([&] { opt.step(); }, {"Adam.step", "parameter 1"});
    EXPECT_EQ(a.to_vector<float>(), std::vector<float>(4, 1.f));
    EXPECT_TRUE(opt.state_dict().count("param.0.step") == 0) << "no step counted";
  }
}
