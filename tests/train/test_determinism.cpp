// Determinism (DESIGN.md): the same seed and thread count give bit-identical parameters after a
// small training loop (seeded init, dropout, GEMMs, cross-entropy, clipping, AdamW, schedule),
// run twice in one process, with the default threads and with one thread. The optimizer and
// the clipping norm are also bit-identical ACROSS thread counts (elementwise updates and a
// blocked sum); GEMM results may legitimately depend on the thread count, so the whole loop is
// compared only at equal thread counts.
#include <gtest/gtest.h>
#include <omp.h>

#include "helpers.h"
#include "qkv/autograd/node.h"
#include "qkv/kernels/optim.h"
#include "qkv/ops/dropout.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/loss.h"
#include "qkv/ops/matmul.h"
#include "qkv/tensor/rng.h"
#include "qkv/train/clip.h"
#include "qkv/train/optim.h"
#include "qkv/train/schedule.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

struct Trained {
  std::vector<Tensor> params;
  std::vector<double> losses;
};

Tensor uniform(const Shape& s, double a, Generator& g) {
  Tensor t = Tensor::empty(s);
  g.uniform(t.data<float>(), t.numel(), float(-a), float(a));
  return t;
}

// x (64, 96) -> linear(96, 384) -> gelu -> dropout(0.1) -> linear(384, 10) -> cross_entropy.
// w1 has 36864 elements, above kernels::kParallelGrain, so the OpenMP paths run.
Trained train_run(uint64_t seed, int steps) {
  Generator g(seed);
  Tensor x = uniform({64, 96}, 1.0, g);
  std::vector<int64_t> labels(64);
  for (auto& l : labels) l = int64_t(g.randint(10));
  Tensor t = Tensor::from_vector<int64_t>(labels, {64});
  Tensor w1 = uniform({384, 96}, 0.1, g).set_requires_grad(true), b1 = Tensor::zeros({384}).set_requires_grad(true);
  Tensor w2 = uniform({10, 384}, 0.05, g).set_requires_grad(true), b2 = Tensor::zeros({10}).set_requires_grad(true);
  auto groups = make_param_groups({{"fc1.weight", w1}, {"fc1.bias", b1}, {"fc2.weight", w2}, {"fc2.bias", b2}},
                                  is_bias_or_norm);
  AdamW opt(groups, 1e-3, {0.9, 0.98}, 1e-9, 0.01);
  WarmupCosine sched(3e-3, 3, steps, 1e-4);
  Trained r;
  for (int s = 1; s <= steps; ++s) {
    opt.zero_grad();
    Tensor h = dropout(gelu(linear(x, w1, b1)), 0.1, true, g);  // (64, 384)
    Tensor loss = cross_entropy(linear(h, w2, b2), t, -100, 0.1);
    backward(loss);
    clip_grad_norm(opt.params(), 0.5);
    opt.set_lr(sched.lr_at(s));
    opt.step();
    r.losses.push_back(loss.item());
  }
  r.params = opt.params();
  return r;
}

void expect_bit_identical(const Trained& a, const Trained& b) {
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i) EXPECT_TRUE(bit_equal(a.params[i], b.params[i])) << "param " << i;
  EXPECT_EQ(a.losses, b.losses);
}

}  // namespace

TEST(Determinism, SameSeedSameThreadsGivesSameBits) {
  Trained a = train_run(7, 8), b = train_run(7, 8);
  expect_bit_identical(a, b);
  EXPECT_LT(a.losses.back(), a.losses.front());  // it trains
}

TEST(Determinism, OneThreadGivesSameBits) {
  ThreadGuard one(1);
  Trained a = train_run(7, 8), b = train_run(7, 8);
  expect_bit_identical(a, b);
}

TEST(Determinism, DifferentSeedGivesDifferentBits) {
  Trained a = train_run(7, 4), b = train_run(8, 4);
  EXPECT_FALSE(bit_equal(a.params[0], b.params[0]));
}

// The optimizer kernels and the clipping norm do not depend on the thread count at all.
TEST(Determinism, OptimizerAndClipAreThreadCountInvariant) {
  auto run = [](int threads) {
    ThreadGuard guard(threads);
    Tensor w = randn({300, 200}, 1).set_requires_grad(true);  // 60000 elements: parallel path
    Tensor v = randn({300, 200}, 2).set_requires_grad(true);
    Adam adam(single_group({w}), 1e-2, {0.9, 0.999}, 1e-8, 0.01, true);
    SGD sgd(single_group({v}), 1e-2, 0.9, 0.0, true, 0.01);
    std::vector<double> norms;
    for (int s = 0; s < 3; ++s) {
      w.set_grad(randn({300, 200}, 10 + s));
      v.set_grad(randn({300, 200}, 20 + s));
      norms.push_back(clip_grad_norm({w, v}, 100.0));
      adam.step();
      sgd.step();
    }
    return std::make_tuple(w, v, norms);
  };
  auto [w1, v1, n1] = run(1);
  auto [w2, v2, n2] = run(std::max(2, omp_get_num_procs()));
  EXPECT_TRUE(bit_equal(w1, w2));
  EXPECT_TRUE(bit_equal(v1, v2));
  EXPECT_EQ(n1, n2);
  EXPECT_GT(n1[0], 100.0);  // the grads really were scaled
}

// Adam::step updates every parameter in one parallel region (kernels::adam_update_all): the same
// bits as kernels::adam_update on each parameter in turn, for 1 and 2 threads. Two parameters
// take the parallel path (one of a size that is not a multiple of 64), three the serial one.
TEST(Determinism, AdamInOneRegionEqualsOneParameterAtATime) {
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    ThreadGuard guard(threads);
    const std::vector<Shape> shapes = {{300, 200}, {129, 257}, {100}, {7, 9}, {5000}};
    std::vector<Tensor> ps, refs, m, v, vmax;
    for (size_t i = 0; i < shapes.size(); ++i) {
      ps.push_back(randn(shapes[i], 40 + i).set_requires_grad(true));
      refs.push_back(ps.back().detach().clone());
      m.push_back(Tensor::zeros(shapes[i]));
      v.push_back(Tensor::zeros(shapes[i]));
      vmax.push_back(Tensor::zeros(shapes[i]));
    }
    AdamW opt(single_group(ps), 1e-2, {0.9, 0.99}, 1e-8, 0.05, true);
    for (int s = 0; s < 3; ++s) {
      for (size_t i = 0; i < shapes.size(); ++i) {
        const Tensor g = randn(shapes[i], 100 * uint64_t(s) + i);
        ps[i].set_grad(g);
        kernels::AdamStep h;
        h.lr = 1e-2, h.beta2 = 0.99, h.weight_decay = 0.05, h.step = s + 1, h.decoupled = true, h.amsgrad = true;
        kernels::adam_update(refs[i], g, m[i], v[i], &vmax[i], h);
      }
      opt.step();
    }
    for (size_t i = 0; i < shapes.size(); ++i) EXPECT_TRUE(bit_equal(ps[i], refs[i])) << "parameter " << i;
  }
}

// clip_grad_norm's sum of squares: fixed blocks summed in order, so any thread count gives the
// same bits (an OpenMP reduction would not); n is not a multiple of the block size.
TEST(Determinism, SumSquaresIsThreadCountInvariant) {
  const int64_t n = 37 * kernels::kSumBlock + 123;
  Tensor x = randn({n}, 5);
  auto run = [&](int threads) {
    ThreadGuard guard(threads);
    return kernels::sum_squares_deterministic(x);
  };
  const double s1 = run(1);
  for (int t : {2, 3, 5}) EXPECT_EQ(run(t), s1) << t << " threads";
  double exact = 0;  // the same sum serially, in one pass: equal to rounding
  for (float v : x.to_vector<float>()) exact += double(v) * double(v);
  EXPECT_NEAR(s1, exact, 1e-12 * exact);
}
