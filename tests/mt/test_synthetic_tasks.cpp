// A small Transformer trained with the real trainer on copy and reverse tasks must reach 100%
// exact match under greedy decoding on held-out sequences. This is the end-to-end check that
// training, masking, teacher forcing and decoding fit together: any off-by-one in the shifted
// targets, a leaking causal mask or a wrong padding mask leaves some sequences wrong.
//
// 600 steps: with this seed both tasks are already exact at 400 (measured: 97% copy / 84% reverse
// at 200, 100% / 99% at 300), so the budget has a 1.5x margin.
//
// Vocabulary: <pad> 0, <s> 1, </s> 2, symbols 3..12. Sources are 3..10 random symbols; every
// batch is fresh data, so the model cannot memorise. Held-out sequences use another seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <unistd.h>

#include "scratch_util.h"
#include "qkv/decode/search.h"
#include "qkv/kernels/bf16.h"
#include "qkv/models/transformer.h"
#include "qkv/train/seq2seq_task.h"
#include "qkv/util/config.h"

using namespace qkv;

namespace {

constexpr int64_t kTaskPad = 0, kTaskBos = 1, kTaskEos = 2, kFirstSymbol = 3, kTaskSymbols = 10;
constexpr int64_t kMinLen = 3, kMaxLen = 10, kBatch = 64;

enum class Task { copy, reverse };

std::vector<int64_t> target_for(Task task, std::vector<int64_t> src) {
  if (task == Task::reverse) std::reverse(src.begin(), src.end());
  return src;
}

std::vector<int64_t> random_sequence(std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> len(kMinLen, kMaxLen), sym(kFirstSymbol, kFirstSymbol + kTaskSymbols - 1);
  std::vector<int64_t> s(size_t(len(rng)));
  for (auto& t : s) t = sym(rng);
  return s;
}

// Pads rows to the longest; returns (B, L) i64 and fills pad (B, L) u8 if given.
Tensor pack(const std::vector<std::vector<int64_t>>& rows, Tensor* pad = nullptr) {
  size_t L = 0;
  for (auto& r : rows) L = std::max(L, r.size());
  std::vector<int64_t> ids(rows.size() * L, kTaskPad);
  std::vector<uint8_t> mask(rows.size() * L, 1);
  for (size_t b = 0; b < rows.size(); ++b)
    for (size_t t = 0; t < rows[b].size(); ++t) ids[b * L + t] = rows[b][t], mask[b * L + t] = 0;
  if (pad) *pad = Tensor::from_vector(mask, {int64_t(rows.size()), int64_t(L)});
  return Tensor::from_vector(ids, {int64_t(rows.size()), int64_t(L)});
}

// Source x </s>, decoder input <s> y, target y </s> (the layout of train/seq2seq_data.h).
class SyntheticStream : public train::BatchStream {
 public:
  SyntheticStream(Task task, uint64_t seed) : task_(task), rng_(seed) {}
  train::Seq2SeqBatch next() override {
    std::vector<std::vector<int64_t>> src, tin, tout;
    train::Seq2SeqBatch b;
    for (int64_t i = 0; i < kBatch; ++i) {
      auto x = random_sequence(rng_);
      auto y = target_for(task_, x);
      x.push_back(kTaskEos);
      std::vector<int64_t> in{kTaskBos};
      in.insert(in.end(), y.begin(), y.end());
      y.push_back(kTaskEos);
      b.src_tokens += int64_t(x.size());
      b.tgt_tokens += int64_t(y.size());
      src.push_back(x), tin.push_back(in), tout.push_back(y);
    }
    b.src = pack(src, &b.src_pad);
    b.tgt_in = pack(tin);
    b.tgt_out = pack(tout);
    ++batches_;
    return b;
  }
  int64_t epoch() const override { return 0; }
  std::map<std::string, int64_t> position() const override { return {{"batches", batches_}}; }
  void restore(const std::map<std::string, int64_t>&) override { throw Error("synthetic stream: no resume"); }

 private:
  Task task_;
  std::mt19937_64 rng_;
  int64_t batches_ = 0;
};

// Trains a fresh model on `task` and returns the greedy exact-match rate on held-out sequences
// (decoded in fp32, as training's validation does); losses gets each step's mean loss.
// bf16_differ_out, if given: how many held-out sequences greedy decoding in bf16 (weights
// converted once, kernels/bf16.h) decodes to other tokens than fp32 (-1 without a bf16 kernel).
double train_and_score(Task task, int64_t steps, int64_t* wrong_out,
                       kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32,
                       std::vector<double>* losses = nullptr, int64_t* bf16_differ_out = nullptr) {
  models::TransformerConfig cfg;
  cfg.src_vocab = cfg.tgt_vocab = kFirstSymbol + kTaskSymbols;
  cfg.d_model = 64, cfg.heads = 4, cfg.enc_layers = 2, cfg.dec_layers = 2, cfg.d_ff = 128;
  cfg.dropout = 0.0;
  cfg.pre_norm = true;
  cfg.shared_embeddings = true;
  cfg.max_len = 32;
  cfg.pad_id = kTaskPad, cfg.bos_id = kTaskBos, cfg.eos_id = kTaskEos;
  Generator init_rng(7);
  models::Transformer model(cfg, init_rng);

  SyntheticStream stream(task, 1234);
  AdamW opt(single_group(model.parameters()), 1.0, {0.9, 0.98}, 1e-9, 0.0);
  WarmupCosine sched(3e-3, steps / 10, steps, 1e-5);
  train::TrainOptions o;
  o.max_steps = steps;
  o.label_smoothing = 0.0;
  o.clip_norm = 1.0;
  o.valid_every = 0;
  o.save_every = 0;
  o.precision = precision;
  train::Seq2SeqTask training(model, stream, kTaskPad);
  train::Trainer trainer(training, opt, sched, o, qkv_test::temp_run_dir("synthetic"), {});
  for (int64_t s = 0; s < steps; ++s) {
    const double loss = trainer.train_step();
    if (losses) losses->push_back(loss);
  }

  model.eval();
  std::mt19937_64 held_out(99);
  std::vector<std::vector<int64_t>> src, want;
  for (int i = 0; i < 256; ++i) {
    auto x = random_sequence(held_out);
    want.push_back(target_for(task, x));
    x.push_back(kTaskEos);
    src.push_back(x);
  }
  Tensor pad;
  Tensor s = pack(src, &pad);
  decode::Options dopt;  // greedy
  auto hyps = decode::translate(model, s, pad, {kTaskBos, kTaskEos, kTaskPad}, dopt);
  int64_t right = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    auto got = hyps[i][0].tokens;
    if (!got.empty() && got.back() == kTaskEos) got.pop_back();
    right += got == want[i];
  }
  *wrong_out = int64_t(want.size()) - right;
  if (bf16_differ_out) {
    *bf16_differ_out = -1;
    if (kernels::dnnl_cpu_info().bf16_native()) {
      kernels::MatmulPrecisionScope bf16(kernels::MatmulPrecision::bf16);
      auto h16 = decode::translate(model, s, pad, {kTaskBos, kTaskEos, kTaskPad}, dopt);
      *bf16_differ_out = 0;
      for (size_t i = 0; i < want.size(); ++i) *bf16_differ_out += h16[i][0].tokens != hyps[i][0].tokens;
    }
  }
  return double(right) / double(want.size());
}

}  // namespace

TEST(SyntheticTasks, CopyReachesExactMatch) {
  int64_t wrong = 0;
  const double acc = train_and_score(Task::copy, 600, &wrong);
  EXPECT_EQ(wrong, 0) << "greedy exact match " << acc * 100 << "% on 256 held-out copies";
}

// Mixed precision (train.precision "bf16", where the CPU has AMX or AVX512_BF16), with both ways
// of running its products (kernels/bf16.h: native and fp32_fma): it copies exactly too, and its
// loss follows the fp32 run's: each 50-step window's mean loss within 0.05 nats of fp32's. Why
// absolute and this wide: once the loss is small the curves are spiky and chaotic, and two fp32
// builds differ as much as bf16 and fp32 do (Release against the ASan Debug build: 0.028 against
// 0.046 at steps 201-250). Largest bf16-fp32 gaps measured: 0.009 (Release), 0.022 (ASan). A wrong
// bf16 product (garbage, or operands not rounded alike) moves the early windows, where the loss is
// 0.6-2, by far more. A test of its own, apart from the fp32 one: scripts/test.sh runs the
// SyntheticTasks again under spinning idle threads, and these three runs need not be among them.
TEST(MixedPrecisionTraining, CopyFollowsTheFp32LossCurveAndReachesExactMatch) {
  if (!kernels::dnnl_cpu_info().bf16_native())
    GTEST_SKIP() << "oneDNN has no bf16 kernel here (" << kernels::dnnl_cpu_info().isa << ")";
  int64_t wrong = 0;
  std::vector<double> f32;
  double acc = train_and_score(Task::copy, 600, &wrong, kernels::MatmulPrecision::fp32, &f32);
  EXPECT_EQ(wrong, 0) << "fp32: greedy exact match " << acc * 100 << "% on 256 held-out copies";
  const kernels::Bf16Products process = kernels::bf16_products();
  for (kernels::Bf16Products how : {kernels::Bf16Products::native, kernels::Bf16Products::fp32_fma}) {
    SCOPED_TRACE(std::string("bf16 products: ") + kernels::bf16_products_name(how));
    kernels::set_bf16_products(how);
    std::vector<double> b16;
    acc = train_and_score(Task::copy, 600, &wrong, kernels::MatmulPrecision::bf16, &b16);
    EXPECT_EQ(wrong, 0) << "bf16: greedy exact match " << acc * 100 << "% on 256 held-out copies";
    ASSERT_EQ(f32.size(), b16.size());
    EXPECT_NE(f32, b16) << "the bf16 run computed exactly what fp32 did: were its products in bf16?";
    for (size_t w = 0; w + 50 <= f32.size(); w += 50) {
      double mf = 0, mb = 0;
      for (size_t i = w; i < w + 50; ++i) mf += f32[i] / 50, mb += b16[i] / 50;
      std::printf("%s steps %3zu-%3zu: mean loss fp32 %.5f bf16 %.5f\n", kernels::bf16_products_name(how), w + 1,
                  w + 50, mf, mb);
      EXPECT_LE(std::abs(mb - mf), 0.05) << "steps " << w + 1 << "-" << w + 50 << ": mean loss bf16 " << mb
                                                      << ", fp32 " << mf;
    }
  }
  kernels::set_bf16_products(process);
}

TEST(SyntheticTasks, ReverseReachesExactMatch) {
  int64_t wrong = 0, bf16_differ = 0;
  double acc = train_and_score(Task::reverse, 600, &wrong, kernels::MatmulPrecision::fp32, nullptr, &bf16_differ);
  EXPECT_EQ(wrong, 0) << "greedy exact match " << acc * 100 << "% on 256 held-out reversals";
  // Greedy decoding in bf16 of the trained model gives fp32's tokens on every held-out sequence
  // (measured: 256 of 256 on AMD EPYC, AVX512_BF16). Skipped below when bf16 is unavailable.
  if (bf16_differ < 0) GTEST_SKIP() << "oneDNN has no bf16 kernel on this CPU: the bf16 comparison did not run";
  std::printf("bf16 greedy decoding differs from fp32 on %lld of 256 held-out reversals\n", (long long)bf16_differ);
  EXPECT_EQ(bf16_differ, 0);
}

// train.max_minutes is a wall-clock budget: run() stops between updates once it is spent and
// saves a final checkpoint, like reaching max_steps.
TEST(SyntheticTasks, TrainerStopsAtWallClockBudget) {
  models::TransformerConfig cfg;
  cfg.src_vocab = cfg.tgt_vocab = kFirstSymbol + kTaskSymbols;
  cfg.d_model = 16, cfg.heads = 2, cfg.enc_layers = 1, cfg.dec_layers = 1, cfg.d_ff = 32, cfg.max_len = 32;
  cfg.pad_id = kTaskPad, cfg.bos_id = kTaskBos, cfg.eos_id = kTaskEos;
  models::Transformer model(cfg);
  SyntheticStream stream(Task::copy, 1);
  Adam opt(single_group(model.parameters()), 1e-3);
  ConstantLR sched(1e-3);
  nlohmann::json j = {{"max_steps", 1000000}, {"max_minutes", 0.005}, {"valid_every", 0}, {"save_every", 0}};
  ConfigReader r(j, "budget.json", "train");
  train::TrainOptions o = train::TrainOptions::from_config(r);
  // A fresh run directory: checkpoints of an earlier run there (another build's test run) would
  // outrank this run's and be kept instead of it.
  std::string dir = ::testing::TempDir() + "/qkv_budget_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  train::Seq2SeqTask task(model, stream, kTaskPad);
  train::Trainer trainer(task, opt, sched, o, dir, {});
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(trainer.run(), train::Outcome::finished);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(trainer.step(), 0);
  EXPECT_LT(trainer.step(), 1000000);
  EXPECT_GE(secs, 0.3);  // 0.005 minutes
  char last[32];
  std::snprintf(last, sizeof last, "step-%09lld", static_cast<long long>(trainer.step()));
  EXPECT_TRUE(std::filesystem::exists(dir + "/checkpoints/" + last)) << "a final checkpoint is written";
  std::filesystem::remove_all(dir);

  nlohmann::json bad = {{"max_minutes", -1}};
  ConfigReader rb(bad, "budget.json", "train");
  EXPECT_THROW(
      {
        try {
          train::TrainOptions::from_config(rb);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("max_minutes"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
}

// train.precision: "fp32" or "bf16", anything else names the file and the key.
TEST(SyntheticTasks, PrecisionKeyIsCheckedAndNamed) {
  nlohmann::json j = {{"max_steps", 10}, {"precision", "fp16"}};
  ConfigReader r(j, "run.json", "train");
  try {
    train::TrainOptions::from_config(r);
    ADD_FAILURE() << "precision fp16 was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("run.json"), std::string::npos) << m;
    EXPECT_NE(m.find("precision"), std::string::npos) << m;
    EXPECT_NE(m.find("\"bf16\""), std::string::npos) << m;
  }
  nlohmann::json ok = {{"max_steps", 10}};
  ConfigReader r2(ok, "run.json", "train");
  EXPECT_EQ(train::TrainOptions::from_config(r2).precision, kernels::MatmulPrecision::fp32);
}
