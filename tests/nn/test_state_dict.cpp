// nn::Module state dicts through safetensors files: round trips and every malformed-file error.
// Each error test asserts that the message names the file and the offending tensor. Also
// nn::EvalScope.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "qkv/io/format/safetensors.h"
#include "qkv/nn/module.h"
#include "qkv/tensor/storage.h"
#include "ref.h"
#include "safetensors_craft.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

// Two levels of scoping: "proj.weight", "proj.bias", "norm.scale" plus a persistent buffer.
class Leaf : public nn::Module {
 public:
  Leaf(int64_t in, int64_t out, uint64_t seed) {
    weight = register_parameter("weight", randn({out, in}, seed));
    bias = register_parameter("bias", randn({out}, seed + 1));
  }
  Tensor weight, bias;
};

class Tiny : public nn::Module {
 public:
  explicit Tiny(uint64_t seed) {
    proj = register_module("proj", std::make_shared<Leaf>(4, 3, seed));
    norm = register_module("norm", std::make_shared<Leaf>(3, 2, seed + 10));
    steps = register_buffer("steps", Tensor::from_vector<int64_t>({int64_t(seed)}, {1}));
  }
  std::shared_ptr<Leaf> proj, norm;
  Tensor steps;
};

std::string tmp_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("qkv_test_nn_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

// Runs f, expects a qkv::Error whose message contains every string in `needles`.
template <typename F>
void expect_error(F&& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "expected a qkv::Error";
  } catch (const Error& e) {
    std::string m = e.what();
    for (auto& s : needles) EXPECT_NE(m.find(s), std::string::npos) << "message lacks '" << s << "': " << m;
  }
}

}  // namespace

TEST(StateDict, NamesAreScopedAndDotted) {
  Tiny m(1);
  auto sd = m.state_dict();
  std::vector<std::string> names;
  for (auto& [n, t] : sd) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"norm.bias", "norm.weight", "proj.bias", "proj.weight", "steps"}));
  EXPECT_EQ(m.named_parameters().size(), 4u);  // the buffer is not a parameter
  EXPECT_EQ(m.num_parameters(), 3 * 4 + 3 + 2 * 3 + 2);
}

TEST(StateDict, SafetensorsRoundTripIsBitIdentical) {
  Tiny a(1), b(100);
  std::string path = tmp_path("roundtrip.safetensors");
  a.save(path, {{"format", "pt"}});
  ASSERT_FALSE(bit_equal(a.proj->weight, b.proj->weight));
  b.load(path);
  for (auto& [name, t] : a.state_dict()) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(bit_equal(t, b.state_dict().at(name)));
  }
  // Loading copies in place: the members (which optimizers hold) see the values.
  EXPECT_TRUE(bit_equal(a.proj->weight, b.proj->weight));
  EXPECT_TRUE(b.proj->weight.requires_grad());
  EXPECT_EQ(safetensors::load(path).metadata.at("format"), "pt");
}

// Module::load reads each tensor straight into its parameter (the file is never held beside the
// model): the storage the model had is the one that holds the values. A tensor whose bytes fail
// their checksum stops the load naming the file and the tensor.
TEST(StateDict, LoadFillsTheParametersInPlaceAndNamesACorruptTensor) {
  Tiny a(1), b(100);
  const std::string path = tmp_path("in_place.safetensors");
  a.save(path);
  const void* storage = b.proj->weight.raw_data();
  allocator_reset_peak();
  const size_t before = allocator_stats().bytes_in_use;
  b.load(path);
  EXPECT_EQ(allocator_stats().peak_bytes_in_use, before) << "no tensor allocated: nothing read beside the model";
  EXPECT_EQ(b.proj->weight.raw_data(), storage);
  for (auto& [name, t] : a.state_dict()) EXPECT_TRUE(bit_equal(t, b.state_dict().at(name))) << name;

  std::string bytes = read_bytes(path);
  const uint64_t n = uint64_t(uint8_t(bytes[0])) | uint64_t(uint8_t(bytes[1])) << 8;  // a small header
  const auto header = nlohmann::json::parse(bytes.substr(8, size_t(n)));
  const size_t at = size_t(8 + n + header.at("proj.weight").at("data_offsets")[0].get<uint64_t>());
  bytes[at] ^= char(1);  // the lowest mantissa bit of its first value
  write_bytes(path, bytes);
  Tiny c(200);
  expect_error([&] { c.load(path); }, {path, "'proj.weight'", "corrupted"});
}

TEST(StateDict, TruncatedFileNamesFileAndTensor) {
  Tiny a(1);
  std::string path = tmp_path("truncated.safetensors");
  a.save(path);
  std::string bytes = read_bytes(path);
  write_bytes(path, bytes.substr(0, bytes.size() - 5));  // the last tensor (in offset order) loses bytes
  Tiny b(2);
  expect_error([&] { b.load(path); }, {path, "steps", "truncated"});
  write_bytes(path, bytes.substr(0, 5));  // not even the 8-byte length
  expect_error([&] { b.load(path); }, {path, "truncated", "8"});
}

TEST(StateDict, HeaderLengthPastTheEnd) {
  Tiny a(1);
  std::string path = tmp_path("header_len.safetensors");
  a.save(path);
  std::string bytes = read_bytes(path);
  uint64_t n = bytes.size() + 100;
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char((n >> (8 * i)) & 0xff);
  write_bytes(path, bytes);
  Tiny b(2);
  expect_error([&] { b.load(path); }, {path, "header length " + std::to_string(n), "past the end"});
}

TEST(StateDict, OverlappingOffsets) {
  // Two f32 (2) tensors whose byte ranges [0, 8) and [4, 12) overlap.
  nlohmann::json h = {{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}},
                      {"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {4, 12}}}}};
  std::string path = tmp_path("overlap.safetensors");
  write_bytes(path, craft_safetensors(h, std::string(12, '\0')));
  expect_error([&] { safetensors::load(path); }, {path, "'b'", "overlaps"});
}

TEST(StateDict, OffsetsThatEndBeforeTheyBeginAreNamedSo) {
  // Inside a buffer of 16 bytes, so "outside the data buffer (file truncated?)" would mislead.
  nlohmann::json h = {{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {12, 4}}}}};
  std::string path = tmp_path("reversed.safetensors");
  write_bytes(path, craft_safetensors(h, std::string(16, '\0')));
  expect_error([&] { safetensors::load(path); }, {path, "'a'", "data_offsets [12, 4] end before they begin"});
}

TEST(StateDict, UnsupportedDtypeInFile) {
  nlohmann::json h = {{"proj.weight", {{"dtype", "F17"}, {"shape", {3, 4}}, {"data_offsets", {0, 48}}}}};
  std::string path = tmp_path("bad_dtype.safetensors");
  write_bytes(path, craft_safetensors(h, std::string(48, '\0')));
  Tiny b(2);
  expect_error([&] { b.load(path); }, {path, "proj.weight", "F17"});
}

TEST(StateDict, DtypeMismatchWithModel) {
  Tiny a(1), b(2);
  auto sd = a.state_dict();
  sd["proj.bias"] = sd["proj.bias"].to(DType::f64);
  std::string path = tmp_path("f64.safetensors");
  safetensors::save(path, sd);
  Tensor before = b.proj->bias.clone();
  expect_error([&] { b.load(path); }, {path, "proj.bias", "f64", "f32"});
  EXPECT_TRUE(bit_equal(b.proj->bias, before));  // nothing modified on error
  EXPECT_FALSE(bit_equal(b.proj->weight, a.proj->weight));
}

TEST(StateDict, MissingTensor) {
  Tiny a(1), b(2);
  auto sd = a.state_dict();
  sd.erase("norm.weight");
  std::string path = tmp_path("missing.safetensors");
  safetensors::save(path, sd);
  expect_error([&] { b.load(path); }, {path, "missing", "norm.weight"});
  // Non-strict loading takes what is there and leaves the rest.
  Tensor kept = b.norm->weight.clone();
  b.load(path, /*strict=*/false);
  EXPECT_TRUE(bit_equal(b.norm->weight, kept));
  EXPECT_TRUE(bit_equal(b.proj->weight, a.proj->weight));
}

TEST(StateDict, ShapeMismatch) {
  Tiny a(1), b(2);
  auto sd = a.state_dict();
  sd["proj.weight"] = randn({4, 3}, 5);
  std::string path = tmp_path("shape.safetensors");
  safetensors::save(path, sd);
  expect_error([&] { b.load(path); }, {path, "proj.weight", "(4, 3)", "(3, 4)"});
  expect_error([&] { b.load(path, /*strict=*/false); }, {"proj.weight"});  // shapes are checked either way
}

TEST(StateDict, StrictRejectsUnknownNames) {
  Tiny a(1), b(2);
  auto sd = a.state_dict();
  sd["proj.extra"] = randn({2}, 3);
  std::string path = tmp_path("unknown.safetensors");
  safetensors::save(path, sd);
  expect_error([&] { b.load(path); }, {path, "unexpected", "proj.extra"});
  b.load(path, /*strict=*/false);
  EXPECT_TRUE(bit_equal(b.proj->weight, a.proj->weight));
}

TEST(StateDict, HoleAndTrailingBytesAreErrors) {
  nlohmann::json h = {{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {4, 12}}}}};
  std::string path = tmp_path("hole.safetensors");
  write_bytes(path, craft_safetensors(h, std::string(12, '\0')));
  expect_error([&] { safetensors::load(path); }, {path, "'a'", "hole"});
  nlohmann::json h2 = {{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}}};
  write_bytes(path, craft_safetensors(h2, std::string(12, '\0')));
  expect_error([&] { safetensors::load(path); }, {path, "trailing"});
}

TEST(StateDict, SizeDisagreesWithShape) {
  nlohmann::json h = {{"w", {{"dtype", "F32"}, {"shape", {3}}, {"data_offsets", {0, 8}}}}};
  std::string path = tmp_path("span.safetensors");
  write_bytes(path, craft_safetensors(h, std::string(8, '\0')));
  expect_error([&] { safetensors::load(path); }, {path, "'w'", "12"});
}

TEST(StateDict, GarbageHeaderIsAnError) {
  std::string path = tmp_path("garbage.safetensors");
  std::string body = "{not json";
  std::string bytes;
  uint64_t n = body.size();
  for (int i = 0; i < 8; ++i) bytes.push_back(char((n >> (8 * i)) & 0xff));
  write_bytes(path, bytes + body);
  expect_error([&] { safetensors::load(path); }, {path, "JSON"});
  expect_error([&] { safetensors::load(tmp_path("does_not_exist.safetensors")); }, {"does_not_exist.safetensors"});
}

// nn::EvalScope: eval mode for every submodule inside the scope, the mode from before it after the
// scope, also when an exception leaves it.
TEST(EvalScope, RestoresTheModeOnExitAndOnException) {
  Tiny m(1);
  auto every_module_in = [&](bool training) {
    if (m.is_training() != training) return false;
    for (const auto& [name, child] : m.named_children())
      if (child->is_training() != training) return false;
    return true;
  };
  ASSERT_TRUE(every_module_in(true));
  {
    const nn::EvalScope scope(m);
    EXPECT_TRUE(every_module_in(false));
  }
  EXPECT_TRUE(every_module_in(true));
  EXPECT_THROW(
      {
        const nn::EvalScope scope(m);
        throw std::runtime_error("a forward pass failed");
      },
      std::runtime_error);
  EXPECT_TRUE(every_module_in(true));
  m.eval();  // a module already in eval mode stays there
  { const nn::EvalScope scope(m); }
  EXPECT_TRUE(every_module_in(false));
}
