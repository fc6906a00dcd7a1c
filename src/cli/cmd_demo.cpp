// `qkv demo-mlp`: the engine demo. Trains a small MLP on 3-class 2-D spirals (CS231n's
// synthetic set, drawn from qkv's Philox generator) with AdamW, linear warm-up + cosine decay
// and global-norm clipping, printing the loss as it falls and the final accuracies.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <string>
#include <vector>

#include "cli.h"
#include "qkv/autograd/node.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/loss.h"
#include "qkv/ops/matmul.h"
#include "qkv/ops/reduce.h"
#include "qkv/tensor/rng.h"
#include "qkv/train/clip.h"
#include "qkv/train/optim.h"
#include "qkv/train/schedule.h"

namespace {

using namespace qkv;

struct Dataset {
  Tensor x;       // (N, 2) f32
  Tensor labels;  // (N) i64
};

// Class k's points lie on an arm: radius r in [0, 1), angle 4k + 4r + noise (radians).
Dataset spirals(int64_t per_class, int64_t classes, double noise, Generator& g) {
  const int64_t n = per_class * classes;
  std::vector<float> xs(static_cast<size_t>(2 * n));
  std::vector<int64_t> ys(static_cast<size_t>(n));
  std::vector<float> eps(static_cast<size_t>(n));
  g.normal(eps.data(), n);
  for (int64_t k = 0; k < classes; ++k) {
    for (int64_t i = 0; i < per_class; ++i) {
      const int64_t j = k * per_class + i;
      const double r = double(i) / double(per_class);
      const double t = 4.0 * double(k) + 4.0 * r + noise * eps[size_t(j)];
      xs[size_t(2 * j)] = float(r * std::sin(t));
      xs[size_t(2 * j + 1)] = float(r * std::cos(t));
      ys[size_t(j)] = k;
    }
  }
  return {Tensor::from_vector(xs, {n, 2}), Tensor::from_vector(ys, {n})};
}

struct Mlp {
  std::vector<Tensor> w, b;  // w[l] (out, in), b[l] (out): PyTorch's Linear layout

  Mlp(const std::vector<int64_t>& sizes, Generator& g) {
    for (size_t l = 0; l + 1 < sizes.size(); ++l) {
      const double a = 1.0 / std::sqrt(double(sizes[l]));  // nn.Linear's default range
      Tensor wl = Tensor::empty({sizes[l + 1], sizes[l]}), bl = Tensor::empty({sizes[l + 1]});
      g.uniform(wl.data<float>(), wl.numel(), float(-a), float(a));
      g.uniform(bl.data<float>(), bl.numel(), float(-a), float(a));
      w.push_back(wl.set_requires_grad(true));
      b.push_back(bl.set_requires_grad(true));
    }
  }
  Tensor forward(const Tensor& x) const {  // (N, 2) -> logits (N, C)
    Tensor h = x;
    for (size_t l = 0; l < w.size(); ++l) {
      h = linear(h, w[l], b[l]);
      if (l + 1 < w.size()) h = gelu(h);
    }
    return h;
  }
  std::vector<std::pair<std::string, Tensor>> named() const {
    std::vector<std::pair<std::string, Tensor>> out;
    for (size_t l = 0; l < w.size(); ++l) {
      out.emplace_back("layers." + std::to_string(l) + ".weight", w[l]);
      out.emplace_back("layers." + std::to_string(l) + ".bias", b[l]);
    }
    return out;
  }
};

double accuracy(const Mlp& net, const Dataset& d) {
  NoGradGuard no_grad;
  Tensor pred = argmax(net.forward(d.x), -1);  // (N) i64
  const int64_t* p = pred.data<int64_t>();
  const int64_t* y = d.labels.data<int64_t>();
  int64_t right = 0;
  for (int64_t i = 0; i < pred.numel(); ++i) right += p[i] == y[i];
  return double(right) / double(pred.numel());
}

int run_demo(int argc, char** argv) {
  CLI::App app{"Engine demo: train an MLP on 3-class 2-D spirals (AdamW + warm-up/cosine + clipping)",
               "qkv demo-mlp"};
  int64_t steps = 400, hidden = 64, per_class = 200, warmup = 20, every = 25, seed = 1;
  double lr = 1e-2, weight_decay = 1e-4, clip = 0.1, min_acc = 0.0;
  app.add_option("--steps", steps, "optimizer steps (full batch)")->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  app.add_option("--hidden", hidden, "width of the two hidden layers")->check(CLI::Range(1, 1 << 16));
  app.add_option("--points", per_class, "training points per class")->check(CLI::Range(1, 1 << 20));
  app.add_option("--lr", lr, "peak learning rate")->check(qkv::cli::positive());
  app.add_option("--warmup", warmup, "linear warm-up steps")->check(qkv::cli::non_negative());
  app.add_option("--weight-decay", weight_decay, "AdamW decoupled weight decay (not on biases)")
      ->check(qkv::cli::non_negative());
  app.add_option("--clip", clip, "max global gradient norm")->check(qkv::cli::positive());
  app.add_option("--print-every", every, "print the loss every N steps")->check(qkv::cli::positive());
  app.add_option("--seed", seed, "seed of the data and the initial weights")->check(qkv::cli::seed_value());
  app.add_option("--min-accuracy", min_acc, "exit 1 if the test accuracy ends below this (0..1)")
      ->check(CLI::Range(0.0, 1.0));
  QKV_PARSE(app, argc, argv);
  QKV_CHECK(warmup < steps, "demo-mlp", "--warmup must be below --steps, got warmup ", warmup, ", steps ", steps);

  const auto t0 = std::chrono::steady_clock::now();
  Generator g{static_cast<uint64_t>(seed)};
  Dataset train = spirals(per_class, 3, 0.2, g), test = spirals(per_class, 3, 0.2, g);
  Mlp net({2, hidden, hidden, 3}, g);
  AdamW opt(make_param_groups(net.named(), is_bias_or_norm), lr, {0.9, 0.999}, 1e-8, weight_decay);
  WarmupCosine sched(lr, warmup, steps, lr * 0.01);
  int64_t nparams = 0;
  for (const Tensor& p : opt.params()) nparams += p.numel();

  std::printf("qkv demo-mlp: 3-class spirals, %lld train / %lld test points; MLP 2-%lld-%lld-3 (%lld parameters), "
              "GELU\n  AdamW(lr %g, weight decay %g), %s, clip %g, %d OpenMP threads\n",
              (long long)train.labels.numel(), (long long)test.labels.numel(), (long long)hidden, (long long)hidden,
              (long long)nparams, lr, weight_decay, sched.describe().c_str(), clip, omp_get_max_threads());
  double first = 0, last = 0;
  int64_t clipped = 0;
  for (int64_t s = 1; s <= steps; ++s) {
    opt.zero_grad();
    Tensor loss = cross_entropy(net.forward(train.x), train.labels);
    backward(loss);
    double norm = clip_grad_norm(opt.params(), clip);
    clipped += norm > clip;
    opt.set_lr(sched.lr_at(s));
    opt.step();
    last = loss.item();
    if (s == 1) first = last;
    if (s == 1 || s % every == 0 || s == steps)
      std::printf("step %5lld  loss %.4f  lr %.2e  grad norm %.3f\n", (long long)s, last, opt.lr(), norm);
  }
  const double acc_train = accuracy(net, train), acc_test = accuracy(net, test);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("loss %.4f -> %.4f; accuracy train %.1f%%, test %.1f%% (chance 33.3%%); %lld of %lld steps clipped; "
              "%.2f s\n", first, last, 100 * acc_train, 100 * acc_test, (long long)clipped, (long long)steps, secs);
  if (acc_test < min_acc) {
    std::fprintf(stderr, "qkv demo-mlp: test accuracy %.3f is below --min-accuracy %.3f\n", acc_test, min_acc);
    return 1;
  }
  return 0;
}

qkv::cli::Register register_demo("demo-mlp", "engine demo: train an MLP on 2-D spirals and show the loss falling",
                                 run_demo);

}  // namespace
