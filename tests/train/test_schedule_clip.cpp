// train/schedule against torch LambdaLR values (tools/refs/train_optim.py, the formulas written
// independently in Python) and train/clip against torch.nn.utils.clip_grad_norm_.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "qkv/train/clip.h"
#include "qkv/train/schedule.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

TEST(Schedule, MatchesTorchLambdaLR) {
  RefFile ref("train_optim");
  int cases = 0;
  for (const auto& c : ref.cases()) {
    if (c.rfind("sched_", 0) != 0) continue;
    SCOPED_TRACE(c);
    auto sched = make_schedule(ref.params(c));
    Tensor lr = ref.get(c, "lr");
    const double* e = lr.data<double>();
    for (int64_t s = 0; s < lr.numel(); ++s) {
      // Both sides evaluate the same formula in double with the same libm: 1e-13 relative.
      ASSERT_NEAR(sched->lr_at(s + 1), e[s], 1e-13 * std::abs(e[s]) + 1e-300) << "step " << s + 1;
    }
    ++cases;
  }
  EXPECT_EQ(cases, 4);
}

TEST(Schedule, ShapesOfTheCurves) {
  NoamSchedule noam(512, 4000, 1.0);
  // Peak at the end of warm-up: 512^-0.5 * 4000^-0.5 (Vaswani et al. 2017).
  EXPECT_NEAR(noam.lr_at(4000), 1.0 / std::sqrt(512.0 * 4000.0), 1e-15);
  EXPECT_LT(noam.lr_at(3999), noam.lr_at(4000));
  EXPECT_LT(noam.lr_at(4001), noam.lr_at(4000));
  WarmupCosine cos(1.0, 10, 110, 0.1);
  EXPECT_DOUBLE_EQ(cos.lr_at(10), 1.0);
  EXPECT_NEAR(cos.lr_at(60), 0.55, 1e-15);  // half way: min + (base - min) / 2
  EXPECT_DOUBLE_EQ(cos.lr_at(110), 0.1);
  EXPECT_DOUBLE_EQ(cos.lr_at(500), 0.1);
  EXPECT_DOUBLE_EQ(ConstantLR(0.3).lr_at(7), 0.3);
  EXPECT_EQ(noam.describe(), "noam(d_model=512, warmup=4000, factor=1)");
}

TEST(Schedule, BadConfigsThrowNamingTheField) {
  EXPECT_THROW(NoamSchedule(512, 0), Error);
  EXPECT_THROW(WarmupCosine(1e-3, 10, 10), Error);
  EXPECT_THROW(WarmupCosine(1e-3, 1, 10, 1e-2), Error);
  EXPECT_THROW(NoamSchedule(8, 2).lr_at(0), Error);
  try {
    make_schedule(nlohmann::json{{"type", "noam"}, {"d_model", 512}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'warmup'"), std::string::npos) << e.what();
  }
  try {
    make_schedule(nlohmann::json{{"type", "linear"}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'linear'"), std::string::npos) << e.what();
  }
  try {  // a misspelt key is an error, not a silent default
    make_schedule(nlohmann::json{{"type", "warmup_cosine"}, {"lr", 1e-3}, {"warmup", 10}, {"total", 100},
                                 {"min_lr", 0.0}, {"warmpu", 5}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'warmpu'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_schedule(nlohmann::json{{"type", "constant"}, {"lr", 1e-3}, {"warmup", 10}}), Error);
}

TEST(Clip, MatchesTorchClipGradNorm) {
  RefFile ref("train_optim");
  int cases = 0;
  for (const auto& c : ref.cases()) {
    if (c.rfind("clip_", 0) != 0) continue;
    SCOPED_TRACE(c);
    auto p = ref.params(c);
    const bool f64 = p["dtype"] == "f64";
    std::vector<Tensor> params;
    for (int i = 0; i < p["n"].get<int>(); ++i) {
      Tensor g = ref.get(c, "g" + std::to_string(i));
      Tensor w = Tensor::zeros(g.shape(), g.dtype()).set_requires_grad(true);
      w.set_grad(g.clone());
      params.push_back(w);
    }
    params.push_back(Tensor::zeros({4}, f64 ? DType::f64 : DType::f32).set_requires_grad(true));  // no grad: skipped
    double total = clip_grad_norm(params, p["max_norm"].get<double>());
    double expected = ref.get(c, "total").data<double>()[0];
    // torch reduces f32 gradients in float (40k terms): 1e-6 relative; f64: 1e-12.
    EXPECT_NEAR(total, expected, (f64 ? 1e-12 : 1e-6) * expected);
    for (int i = 0; i < p["n"].get<int>(); ++i)
      EXPECT_CLOSE(params[size_t(i)].grad(), ref.get(c, "out" + std::to_string(i)), f64 ? kF64 : kF32) << i;
    ++cases;
  }
  EXPECT_EQ(cases, 4);
}

TEST(Clip, NonFiniteNormCanThrow) {
  Tensor w = Tensor::zeros({3}).set_requires_grad(true);
  w.set_grad(Tensor::from_vector<float>({1.f, INFINITY, 0.f}, {3}));
  EXPECT_THROW(clip_grad_norm({w}, 1.0, true), Error);
  EXPECT_THROW(clip_grad_norm({w}, 0.0), Error);
  Tensor u = Tensor::zeros({2}).set_requires_grad(true);
  u.set_grad(Tensor::from_vector<float>({3.f, 4.f}, {2}));
  EXPECT_DOUBLE_EQ(grad_norm({u}), 5.0);
}
