// `qkv verify`: every .safetensors file under a directory is read with its checksums; a flipped
// bit fails with the file, the tensor and both checksums; a file from elsewhere (no checksums)
// passes and says so.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "qkv/io/format/safetensors.h"
#include "qkv/util/file.h"
#include "run_qkv.h"

namespace fs = std::filesystem;

TEST(VerifyCli, ChecksumsOfADirectoryTree) {
  fs::path dir = fs::path(::testing::TempDir()) / ("qkv_verify_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "step-1");
  const std::string a = (dir / "step-1" / "model.safetensors").string();
  const std::string b = (dir / "step-1" / "training_state.safetensors").string();
  qkv::safetensors::save(a, {{"w", qkv::Tensor::from_vector<float>({1.5f, -2.0f, 3.25f}, {3})}});
  qkv::safetensors::save(b, {{"step", qkv::Tensor::from_vector<int64_t>({7}, {1})}});
  const fs::path out = dir / "out.txt", log = dir / "log.txt";
  ASSERT_EQ(qkv::testing::run_qkv({"verify", dir.string()}, log, out.string()), 0) << qkv::read_file(log.string());
  const std::string listing = qkv::read_file(out.string());
  EXPECT_NE(listing.find("ok " + a + ": 1 tensors, checksums match"), std::string::npos) << listing;
  EXPECT_NE(listing.find("ok " + b + ": 1 tensors, checksums match"), std::string::npos) << listing;

  std::string bytes = qkv::read_file(a);
  bytes[bytes.size() - 2] ^= 0x10;  // a bit of the last element
  qkv::write_file_atomic(a, bytes);
  EXPECT_EQ(qkv::testing::run_qkv({"verify", dir.string()}, log, out.string()), 1);
  const std::string err = qkv::read_file(log.string());
  EXPECT_NE(err.find(a + ": tensor 'w': corrupted data: CRC-32C"), std::string::npos) << err;
  EXPECT_NE(err.find(", the file recorded "), std::string::npos) << err;

  // A file as another tool writes it: no qkv checksums.
  std::string h = R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", raw;
  for (int i = 0; i < 8; ++i) raw.push_back(char((uint64_t(h.size()) >> (8 * i)) & 0xff));
  qkv::write_file_atomic((dir / "foreign.safetensors").string(), raw + h + std::string(4, '\0'));
  ASSERT_EQ(qkv::testing::run_qkv({"verify", (dir / "foreign.safetensors").string()}, log, out.string()), 0);
  EXPECT_NE(qkv::read_file(out.string()).find("no checksums recorded"), std::string::npos);
  EXPECT_NE(qkv::testing::run_qkv({"verify", (dir / "missing").string()}, log, out.string()), 0);
  fs::remove_all(dir);
}
