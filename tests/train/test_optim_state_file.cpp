// The optimizer's state written to a file and read back tensor by tensor, as a checkpoint and a
// resume do (Trainer::save_checkpoint, restore_training_state): state_dict_view() shares the
// buffers instead of copying them, load_state_dict(Reader, prefix) reads each buffer straight
// into the new state. Bits must survive the trip exactly; a bad file must leave the state alone.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "peak_rss.h"
#include "qkv/io/format/safetensors.h"
#include "qkv/io/format/safetensors_reader.h"
#include "qkv/tensor/storage.h"
#include "qkv/tensor/rng.h"
#include "qkv/train/optim.h"
#include "qkv/util/buffer.h"
#include "scratch_util.h"
#include "ref.h"

using namespace qkv;
using qkv::testing::bit_equal;

namespace {

Tensor random_leaf(const Shape& s, uint64_t seed) {
  Generator g(seed);
  Tensor t = Tensor::empty(s);
  g.normal(t.data<float>(), t.numel(), 0.f, 1.f);
  return t.set_requires_grad(true);
}

// steps of made-up gradients (seeded by the step), the same for every optimizer given them
void run(Optimizer& opt, std::vector<Tensor> ps, int from, int to) {  // tensors are handles
  for (int s = from; s < to; ++s) {
    opt.zero_grad();
    for (size_t i = 0; i < ps.size(); ++i) {
      Tensor g = random_leaf(ps[i].shape(), uint64_t(100 * s + i)).detach();
      ps[i].set_grad(g);
    }
    opt.step();
  }
}

std::vector<Tensor> clones(const std::vector<Tensor>& ps) {
  std::vector<Tensor> out;
  for (const Tensor& p : ps) out.push_back(p.detach().clone().set_requires_grad(true));
  return out;
}

void expect_same_state(const Optimizer& a, const Optimizer& b) {
  const auto x = a.state_dict(), y = b.state_dict();
  ASSERT_EQ(x.size(), y.size());
  for (const auto& [k, t] : x) {
    ASSERT_TRUE(y.count(k)) << k;
    EXPECT_TRUE(bit_equal(t, y.at(k))) << k;
  }
}

void expect_error(const std::function<void()>& f, std::initializer_list<const char*> parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    for (const char* p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

// a file as Trainer::save_checkpoint writes one: the optimizer's entries under "optim.", and others
void write_state(const std::string& path, const Optimizer& opt) {
  std::map<std::string, Tensor> st;
  for (auto& [k, v] : opt.state_dict_view()) st["optim." + k] = v;
  st["step"] = Tensor::scalar(7.0, DType::i64);
  safetensors::save(path, st);
}

}  // namespace

TEST(OptimStateFile, ReadBackTensorByTensorContinuesBitIdentically) {
  const qkv_test::ScopedTempDir tmp("optim_state", "bits");
  const std::string file = tmp.dir + "/training_state.safetensors";
  const std::vector<Tensor> start = {random_leaf({5, 7}, 1), random_leaf({7}, 2), random_leaf({3}, 3)};

  std::vector<Tensor> straight = clones(start);
  Adam a(single_group(straight), 1e-2, {0.9, 0.999}, 1e-8, 0.01, /*amsgrad=*/true);
  run(a, straight, 0, 12);

  std::vector<Tensor> first = clones(start);
  Adam b(single_group(first), 1e-2, {0.9, 0.999}, 1e-8, 0.01, true);
  run(b, first, 0, 5);
  write_state(file, b);

  std::vector<Tensor> resumed = clones(first);
  Adam c(single_group(resumed), 1e-2, {0.9, 0.999}, 1e-8, 0.01, true);
  c.load_state_dict(safetensors::Reader(file), "optim.");
  expect_same_state(b, c);
  run(c, resumed, 5, 12);
  for (size_t i = 0; i < start.size(); ++i) EXPECT_TRUE(bit_equal(resumed[i], straight[i])) << "parameter " << i;

  // ...and without the state the run differs (the test can fail)
  std::vector<Tensor> cold = clones(first);
  Adam d(single_group(cold), 1e-2, {0.9, 0.999}, 1e-8, 0.01, true);
  run(d, cold, 5, 12);
  EXPECT_FALSE(bit_equal(cold[0], straight[0]));
}

TEST(OptimStateFile, TheViewSharesTheBuffersAndTheSnapshotDoesNot) {
  Tensor w = random_leaf({4, 4}, 5);
  AdamW opt(single_group({w}), 1e-2);
  run(opt, {w}, 0, 1);
  const auto view = opt.state_dict_view(), snapshot = opt.state_dict();
  EXPECT_TRUE(bit_equal(view.at("param.0.exp_avg"), snapshot.at("param.0.exp_avg")));
  const Tensor before = snapshot.at("param.0.exp_avg").clone();
  run(opt, {w}, 1, 2);
  EXPECT_FALSE(bit_equal(view.at("param.0.exp_avg"), before)) << "the view follows the optimizer";
  EXPECT_TRUE(bit_equal(snapshot.at("param.0.exp_avg"), before)) << "the snapshot does not";
  EXPECT_TRUE(bit_equal(view.at("param.0.exp_avg"), opt.state_dict().at("param.0.exp_avg")));
}

TEST(OptimStateFile, ABadFileNamesTheEntryAndLeavesTheStateAlone) {
  const qkv_test::ScopedTempDir tmp("optim_state", "bad");
  const std::string file = tmp.dir + "/training_state.safetensors";
  std::vector<Tensor> ps = {random_leaf({64, 32}, 7), random_leaf({32}, 8)};
  Adam saved(single_group(ps), 1e-3);
  run(saved, ps, 0, 3);
  write_state(file, saved);

  std::vector<Tensor> qs = clones(ps);
  Adam opt(single_group(qs), 1e-3);
  run(opt, qs, 0, 1);  // a state of its own, which a failed load must keep
  const auto mine = opt.state_dict();
  auto kept = [&] {
    const auto now = opt.state_dict();
    ASSERT_EQ(now.size(), mine.size());
    for (const auto& [k, t] : mine) EXPECT_TRUE(bit_equal(t, now.at(k))) << k;
  };

  // the wrong prefix: nothing of the optimizer's is there
  expect_error([&] { opt.load_state_dict(safetensors::Reader(file), "optimizer."); },
               {"Adam.load_state_dict", "missing entry 'group.0."});
  kept();
  // a parameter of another shape
  std::vector<Tensor> other = {random_leaf({64, 31}, 7), random_leaf({32}, 8)};
  Adam wrong(single_group(other), 1e-3);
  expect_error([&] { wrong.load_state_dict(safetensors::Reader(file), "optim."); },
               {"param.0.exp_avg", "f32(64, 31)", "f32(64, 32)"});

  // a parameter's step removed and its buffers left: the missing step is named (it was "unexpected
  // entry 'param.1.exp_avg'", the buffers taken for strays)
  {
    std::map<std::string, Tensor> st;
    for (auto& [k, v] : saved.state_dict_view())
      if (k != "param.1.step") st["optim." + k] = v;
    const std::string no_step = tmp.dir + "/no_step.safetensors";
    safetensors::save(no_step, st);
    expect_error([&] { opt.load_state_dict(safetensors::Reader(no_step), "optim."); },
                 {"missing entry 'param.1.step' (its 'param.1.exp_avg' is there)"});
    kept();
  }
  // one byte of the second parameter's exp_avg_sq flipped: the checksum names it, once the first
  // parameter's buffers have been read; the state is still the old one
  const std::string victim = "optim.param.1.exp_avg_sq";
  const safetensors::Reader r(file);
  ASSERT_TRUE(r.contains(victim));
  const auto bytes = [&] {
    std::ifstream f(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }();
  const std::string needle(static_cast<const char*>(saved.state_dict().at("param.1.exp_avg_sq").raw_data()), 32 * 4);
  const size_t at = bytes.find(needle);
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(bytes.find(needle, at + 1), std::string::npos);
  std::string bad = bytes;
  bad[at + 17] = char(bad[at + 17] ^ 0x10);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bad;
  expect_error([&] { opt.load_state_dict(safetensors::Reader(file), "optim."); }, {victim.c_str(), file.c_str()});
  kept();
}

// The moments of 32 Mi parameters (256 MiB): reading them back takes about their own size, not
// twice it (the whole file beside the new state) or more (the old load's copies).
TEST(OptimStateFile, ThePeakWhileLoadingIsAboutTheMomentsThemselves) {
  if (kBufferAsan) GTEST_SKIP() << "under AddressSanitizer every buffer is zero-filled";
  const qkv_test::ScopedTempDir tmp("optim_state", "peak");
  const std::string file = tmp.dir + "/training_state.safetensors";
  const int64_t n = int64_t(32) << 20;
  Tensor w = Tensor::zeros({n}).set_requires_grad(true);
  {
    AdamW opt(single_group({w}), 1e-3);
    w.set_grad(Tensor::ones({n}));
    opt.step();
    write_state(file, opt);
  }
  w.set_grad(Tensor());
  AdamW fresh(single_group({w}), 1e-3);
  allocator_empty_cache();
  if (!qkv::testing::reset_peak_rss()) GTEST_SKIP() << "/proc/self/clear_refs is not writable here";
  const int64_t before = qkv::testing::status_kib("VmRSS:");
  ASSERT_GT(before, 0) << "no VmRSS in /proc/self/status";
  fresh.load_state_dict(safetensors::Reader(file), "optim.");
  const int64_t peak_kib = qkv::testing::status_kib("VmHWM:") - before;
  const int64_t moments_kib = 2 * n * 4 / 1024;
  std::printf("peak %lld KiB while loading %lld KiB of moments\n", (long long)peak_kib, (long long)moments_kib);
  EXPECT_LT(peak_kib, moments_kib + moments_kib / 8);
  const safetensors::Reader r(file);
  EXPECT_TRUE(bit_equal(fresh.state_dict_view().at("param.0.exp_avg"), r.read("optim.param.0.exp_avg")));
}
