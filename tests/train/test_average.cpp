// Checkpoint averaging (train::average_checkpoints, last_checkpoints): every floating tensor is
// the element-wise mean, computed here independently in double and rounded once; the other model
// files are copied; mismatched checkpoints (a tensor, the config, the tokenizer) are refused with
// the file and tensor.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "helpers.h"
#include "qkv/io/format/safetensors.h"
#include "qkv/train/checkpoint.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"
#include "scratch_util.h"

namespace fs = std::filesystem;
using namespace qkv;

namespace {

using qkv::testing::error_of;

// A checkpoint directory: config.json, tokenizer.json, training_state.safetensors and
// model.safetensors with a (3, 4) f32 "w", a (5) f64 "b" and an i64 "ids" (the same in all).
std::string make_checkpoint(const std::string& root, const std::string& name, uint32_t seed,
                            const std::string& config = "{\"model\": 1}\n",
                            const std::string& tokenizer = "the tokenizer") {
  std::mt19937 rng(seed);
  std::normal_distribution<double> n(0.0, 1.0);
  std::vector<float> w(12);
  std::vector<double> b(5);
  for (auto& x : w) x = float(n(rng));
  for (auto& x : b) x = n(rng);
  const std::string dir = (fs::path(root) / name).string();
  fs::create_directories(dir);
  safetensors::save(dir + "/model.safetensors", {{"w", Tensor::from_vector<float>(w, {3, 4})},
                                                 {"b", Tensor::from_vector<double>(b, {5})},
                                                 {"ids", Tensor::from_vector<int64_t>({7, 8, 9}, {3})}});
  safetensors::save(dir + "/training_state.safetensors", {{"step", Tensor::from_vector<int64_t>({1}, {1})}});
  write_file_atomic(dir + "/config.json", config);
  write_file_atomic(dir + "/tokenizer.json", tokenizer);
  return dir;
}

}  // namespace

TEST(AverageCheckpoints, MeanOfEveryFloatingTensorRoundedOnce) {
  const std::string root = qkv_test::scratch_dir("average_mean");
  std::vector<std::string> dirs = {make_checkpoint(root, "a", 1), make_checkpoint(root, "b", 2),
                                   make_checkpoint(root, "c", 3)};
  const std::string out = root + "/avg";
  train::average_checkpoints(dirs, out);

  auto got = safetensors::load(out + "/model.safetensors");
  std::vector<std::vector<float>> ws;
  std::vector<std::vector<double>> bs;
  for (const auto& d : dirs) {
    auto c = safetensors::load(d + "/model.safetensors");
    ws.push_back(c.tensors.at("w").to_vector<float>());
    bs.push_back(c.tensors.at("b").to_vector<double>());
  }
  std::vector<float> w = got.tensors.at("w").to_vector<float>();
  std::vector<double> b = got.tensors.at("b").to_vector<double>();
  ASSERT_EQ(got.tensors.at("w").shape(), Shape({3, 4}));
  ASSERT_EQ(got.tensors.at("w").dtype(), DType::f32);
  for (size_t i = 0; i < w.size(); ++i)  // f32: exact, the double mean rounded once
    EXPECT_EQ(w[i], float((double(ws[0][i]) + double(ws[1][i]) + double(ws[2][i])) / 3.0)) << i;
  for (size_t i = 0; i < b.size(); ++i) EXPECT_EQ(b[i], (bs[0][i] + bs[1][i] + bs[2][i]) / 3.0) << i;
  EXPECT_EQ(got.tensors.at("ids").to_vector<int64_t>(), (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(read_file(out + "/tokenizer.json"), "the tokenizer");
  EXPECT_EQ(read_file(out + "/config.json"), "{\"model\": 1}\n");
  EXPECT_FALSE(fs::exists(out + "/training_state.safetensors"));

  // One checkpoint averages to itself, bit for bit.
  train::average_checkpoints({dirs[0]}, root + "/one");
  EXPECT_EQ(safetensors::load(root + "/one/model.safetensors").tensors.at("w").to_vector<float>(), ws[0]);
}

TEST(AverageCheckpoints, RefusesCheckpointsOfDifferentModels) {
  const std::string root = qkv_test::scratch_dir("average_refuse");
  const std::string a = make_checkpoint(root, "a", 1);
  const std::string other_config = make_checkpoint(root, "cfg", 2, "{\"model\": 2}\n");
  std::string msg = error_of([&] { train::average_checkpoints({a, other_config}, root + "/out"); });
  EXPECT_MENTIONS(msg, "config.json");
  EXPECT_MENTIONS(msg, "only checkpoints of one model");
  const std::string other_tokenizer = make_checkpoint(root, "tok", 2, "{\"model\": 1}\n", "another tokenizer");
  msg = error_of([&] { train::average_checkpoints({a, other_tokenizer}, root + "/out"); });
  EXPECT_MENTIONS(msg, a + "/tokenizer.json: differs from " + other_tokenizer + "/tokenizer.json");
  fs::remove(other_tokenizer + "/tokenizer.json");
  msg = error_of([&] { train::average_checkpoints({a, other_tokenizer}, root + "/out"); });
  EXPECT_MENTIONS(msg, a + "/tokenizer.json: is not in " + other_tokenizer);
  EXPECT_FALSE(fs::exists(root + "/out"));

  const std::string shape = make_checkpoint(root, "shape", 3);
  safetensors::save(shape + "/model.safetensors", {{"w", Tensor::zeros({4, 3})},
                                                   {"b", Tensor::zeros({5}, DType::f64)},
                                                   {"ids", Tensor::from_vector<int64_t>({7, 8, 9}, {3})}});
  msg = error_of([&] { train::average_checkpoints({a, shape}, root + "/out"); });
  EXPECT_MENTIONS(msg, shape + "/model.safetensors");
  EXPECT_MENTIONS(msg, "tensor 'w'");

  const std::string ids = make_checkpoint(root, "ids", 4);
  safetensors::save(ids + "/model.safetensors", {{"w", Tensor::zeros({3, 4})},
                                                 {"b", Tensor::zeros({5}, DType::f64)},
                                                 {"ids", Tensor::from_vector<int64_t>({7, 8, 10}, {3})}});
  msg = error_of([&] { train::average_checkpoints({a, ids}, root + "/out"); });
  EXPECT_MENTIONS(msg, "tensor 'ids'");
  EXPECT_MENTIONS(msg, "cannot be averaged");

  const std::string missing = make_checkpoint(root, "missing", 5);
  safetensors::save(missing + "/model.safetensors", {{"w", Tensor::zeros({3, 4})},
                                                     {"x", Tensor::zeros({5}, DType::f64)},
                                                     {"ids", Tensor::from_vector<int64_t>({7, 8, 9}, {3})}});
  msg = error_of([&] { train::average_checkpoints({a, missing}, root + "/out"); });
  EXPECT_MENTIONS(msg, "tensor 'x'");
  EXPECT_FALSE(fs::exists(root + "/out"));  // nothing half-written
}

TEST(AverageCheckpoints, LastCheckpointsOfARun) {
  const std::string run = qkv_test::scratch_dir("average_run");
  for (int step : {100, 200, 300}) {
    char name[32];
    std::snprintf(name, sizeof name, "step-%09d", step);
    make_checkpoint(run + "/checkpoints", name, uint32_t(step));
  }
  auto last2 = train::last_checkpoints(run, 2);
  ASSERT_EQ(last2.size(), 2u);
  EXPECT_EQ(fs::path(last2[0]).filename(), "step-000000200");
  EXPECT_EQ(fs::path(last2[1]).filename(), "step-000000300");
  std::string msg = error_of([&] { train::last_checkpoints(run, 4); });
  EXPECT_MENTIONS(msg, "expected at least 4 checkpoints");
  EXPECT_MENTIONS(msg, "found 3");
}
