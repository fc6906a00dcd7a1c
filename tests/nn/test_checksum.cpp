// Corrupted checkpoints are refused at load: safetensors files written by qkv carry the CRC-32C
// of every tensor's bytes in __metadata__ (qkv/io/format/safetensors.h); files from elsewhere
// have none and still load. The CRC itself is checked against RFC 3720's published vectors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "qkv/io/format/safetensors.h"
#include "qkv/io/format/safetensors_reader.h"
#include "qkv/util/checksum.h"
#include "qkv/util/file.h"
#include "helpers.h"
#include "ref.h"
#include "safetensors_craft.h"

using namespace qkv;
using qkv::testing::craft_safetensors;
using qkv::testing::error_of;

namespace {

std::string checksum_tmp_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("qkv_test_checksum_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

std::map<std::string, Tensor> sample() {
  return {{"encoder.weight", qkv::testing::randn({5, 7}, 1)},
          {"encoder.bias", qkv::testing::randn({7}, 2)},
          {"step", Tensor::from_vector<int64_t>({42}, {1})}};
}

// Where tensor `name`'s bytes start in a serialized file.
size_t data_start(const std::string& bytes, const std::string& name) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  return 8 + n + header[name]["data_offsets"][0].get<size_t>();
}

}  // namespace

// RFC 3720 (iSCSI), appendix B.4, and the "123456789" check value of the CRC catalogue.
TEST(Checksum, Crc32cMatchesPublishedVectors) {
  std::string zeros(32, '\0'), ones(32, '\xff'), inc(32, '\0'), dec(32, '\0');
  for (int i = 0; i < 32; ++i) inc[size_t(i)] = char(i), dec[size_t(i)] = char(31 - i);
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc32c(inc.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(crc32c(dec.data(), 32), 0x113FDB5Cu);
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  // Continuing from a previous value equals one pass, for every split (the 8-byte and tail paths).
  for (size_t cut = 0; cut <= 32; ++cut)
    EXPECT_EQ(crc32c(inc.data() + cut, 32 - cut, crc32c(inc.data(), cut)), 0x46DD794Eu) << cut;
  EXPECT_EQ(crc32c_hex(0xE3069283u), "e3069283");
  EXPECT_EQ(crc32c_hex(0x0000abcdu), "0000abcd");
}

TEST(Checksum, RecordedOnSaveAndHiddenAtLoad) {
  std::string path = checksum_tmp_path("recorded.safetensors");
  safetensors::save(path, sample(), {{"format", "pt"}});
  const std::string bytes = read_file(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  auto meta = nlohmann::json::parse(bytes.substr(8, n))["__metadata__"];
  for (auto& [name, t] : sample()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(meta.contains(std::string(safetensors::kChecksumPrefix) + name)) << meta.dump();
    Tensor c = t.contiguous();
    EXPECT_EQ(meta[std::string(safetensors::kChecksumPrefix) + name].get<std::string>(),
              crc32c_hex(crc32c(c.raw_data(), size_t(c.numel()) * dtype_size(c.dtype()))));
  }
  auto loaded = safetensors::load(path);
  EXPECT_EQ(loaded.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  EXPECT_EQ(loaded.tensors.size(), 3u);
}

TEST(Checksum, BitFlippedTensorDataNamesFileTensorAndBothChecksums) {
  std::string path = checksum_tmp_path("flipped.safetensors");
  safetensors::save(path, sample());
  const std::string good = read_file(path);
  Tensor bias = sample().at("encoder.bias");
  const std::string expected = crc32c_hex(crc32c(bias.raw_data(), 7 * 4));
  for (int bit : {0, 5, 31}) {  // a mantissa bit, another, the sign of a later element
    std::string bad = good;
    bad[data_start(bad, "encoder.bias") + size_t(bit / 8) + (bit == 31 ? 8 : 0)] ^= char(1 << (bit % 8));
    write_file_atomic(path, bad);
    const std::string m = error_of([&] { safetensors::load(path); });
    EXPECT_NE(m.find(path), std::string::npos) << m;
    EXPECT_NE(m.find("'encoder.bias'"), std::string::npos) << m;
    EXPECT_NE(m.find("corrupted"), std::string::npos) << m;
    EXPECT_NE(m.find("recorded " + expected), std::string::npos) << m;
    std::string flipped(bad.data() + data_start(bad, "encoder.bias"), 7 * 4);
    EXPECT_NE(m.find("is " + crc32c_hex(crc32c(flipped.data(), flipped.size()))), std::string::npos) << m;
  }
}

TEST(Checksum, TruncatedCheckpointIsRefusedNamingTheFile) {
  std::string path = checksum_tmp_path("truncated.safetensors");
  safetensors::save(path, sample());
  const std::string good = read_file(path);
  for (size_t keep : {good.size() - 1, data_start(good, "encoder.weight") + 3, size_t(20), size_t(3)}) {
    write_file_atomic(path, good.substr(0, keep));
    const std::string m = error_of([&] { safetensors::load(path); });
    EXPECT_EQ(m.rfind(path, 0), 0u) << "keep " << keep << ": " << m;
  }
}

TEST(Checksum, CorruptedChecksumEntriesAreErrors) {
  // A checksum for a tensor the file lacks, a tensor without one, a malformed one.
  Tensor a = qkv::testing::randn({2}, 3);
  std::string data(static_cast<const char*>(a.raw_data()), 8);
  const std::string key = std::string(safetensors::kChecksumPrefix) + "a";
  const std::string crc = crc32c_hex(crc32c(data.data(), 8));
  nlohmann::json entry = {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}};
  std::string path = checksum_tmp_path("entries.safetensors");

  write_file_atomic(path, craft_safetensors({{"a", entry}, {"__metadata__", {{key, crc}}}}, data));
  EXPECT_EQ(safetensors::load(path).tensors.count("a"), 1u);  // the control: a good file loads

  write_file_atomic(path, craft_safetensors({{"a", entry}, {"__metadata__", {{key, crc}, {key + "x", crc}}}}, data));
  std::string m = error_of([&] { safetensors::load(path); });
  EXPECT_NE(m.find(key + "x"), std::string::npos) << m;

  nlohmann::json two = {{"a", entry}, {"b", {{"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {8, 8}}}},
                        {"__metadata__", {{key, crc}}}};
  write_file_atomic(path, craft_safetensors(two, data));
  m = error_of([&] { safetensors::load(path); });
  EXPECT_NE(m.find("'b'"), std::string::npos) << m;
  EXPECT_NE(m.find("no checksum"), std::string::npos) << m;

  write_file_atomic(path, craft_safetensors({{"a", entry}, {"__metadata__", {{key, "E3069283"}}}}, data));
  m = error_of([&] { safetensors::load(path); });
  EXPECT_NE(m.find("8 lowercase hex digits, got 'E3069283'"), std::string::npos) << m;
}

TEST(Checksum, FilesWithoutChecksumsStillLoad) {
  // As written by other tools (Hugging Face's safetensors): no qkv entries, other metadata kept.
  Tensor a = qkv::testing::randn({3}, 4);
  std::string path = checksum_tmp_path("foreign.safetensors");
  write_file_atomic(path, craft_safetensors({{"a", {{"dtype", "F32"}, {"shape", {3}}, {"data_offsets", {0, 12}}}},
                                             {"__metadata__", {{"format", "pt"}}}},
                                            std::string(static_cast<const char*>(a.raw_data()), 12)));
  auto c = safetensors::load(path);
  EXPECT_TRUE(qkv::testing::bit_equal(c.tensors.at("a"), a));
  EXPECT_EQ(c.metadata.at("format"), "pt");
}

TEST(Checksum, StaleChecksumsInCallerMetadataAreReplaced) {
  // Averaging copies one file's metadata onto new tensors: the checksums must be the new bytes'.
  std::string path = checksum_tmp_path("restamped.safetensors");
  auto tensors = sample();
  std::map<std::string, std::string> meta{{"format", "pt"},
                                          {std::string(safetensors::kChecksumPrefix) + "encoder.bias", "00000000"}};
  safetensors::save(path, tensors, meta);
  auto c = safetensors::load(path);
  EXPECT_TRUE(qkv::testing::bit_equal(c.tensors.at("encoder.bias"), tensors.at("encoder.bias")));
  EXPECT_EQ(c.metadata.size(), 1u);
}

// An independent implementation: tools/fuzz_seeds.py computes CRC-32C bit by bit in Python and
// writes the checksums into this seed file; qkv must accept them.
TEST(Checksum, AcceptsChecksumsWrittenByAnIndependentImplementation) {
  const std::string seed = std::string(QKV_SOURCE_DIR) + "/tests/fuzz/corpus/safetensors/qkv_checksummed.safetensors";
  safetensors::Contents c = safetensors::load(seed);
  EXPECT_TRUE(c.checksummed);
  EXPECT_EQ(c.tensors.size(), 2u);
  EXPECT_EQ(c.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
}

// safetensors::Reader, which load() is built on: the header checked at open, each tensor read on
// demand. It must give what parse() gives from the same bytes in memory.
TEST(Checksum, ReaderReadsTensorByTensorWhatParseReadsAtOnce) {
  std::string path = checksum_tmp_path("reader.safetensors");
  safetensors::save(path, sample(), {{"format", "pt"}});
  const safetensors::Contents whole = safetensors::parse(read_file(path), path);
  const safetensors::Reader file(path);
  EXPECT_TRUE(file.has_checksums());
  EXPECT_EQ(file.metadata(), whole.metadata);
  EXPECT_EQ(file.names(), (std::vector<std::string>{"encoder.bias", "encoder.weight", "step"}));
  for (auto& [name, t] : sample()) {
    SCOPED_TRACE(name);
    EXPECT_EQ(file.shape(name), t.shape());
    EXPECT_EQ(file.dtype(name), t.dtype());
    EXPECT_TRUE(qkv::testing::bit_equal(file.read(name), t));
    EXPECT_TRUE(qkv::testing::bit_equal(whole.tensors.at(name), t));
  }
  const std::string m = error_of([&] { file.read("decoder.weight"); });
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_NE(m.find("no tensor 'decoder.weight'"), std::string::npos) << m;
  // read_into: into a tensor of the same shape and dtype (a parameter), nothing else.
  Tensor dst = Tensor::empty({5, 7});
  const uint64_t version = dst.storage()->version();
  file.read_into("encoder.weight", dst);
  EXPECT_TRUE(qkv::testing::bit_equal(dst, sample().at("encoder.weight")));
  EXPECT_GT(dst.storage()->version(), version);  // announced: packed copies of it are rebuilt
  Tensor wrong = Tensor::empty({7, 5});
  const std::string w = error_of([&] { file.read_into("encoder.weight", wrong); });
  EXPECT_NE(w.find(path), std::string::npos) << w;
  EXPECT_NE(w.find("f32(7, 5)"), std::string::npos) << w;
}

TEST(Checksum, ReaderFindsABitFlipInTheTensorItReads) {
  std::string path = checksum_tmp_path("reader_flipped.safetensors");
  safetensors::save(path, sample());
  std::string bad = read_file(path);
  bad[data_start(bad, "encoder.bias") + 2] ^= char(0x10);
  write_file_atomic(path, bad);
  const safetensors::Reader file(path);  // the header is sound: opening succeeds
  EXPECT_TRUE(qkv::testing::bit_equal(file.read("encoder.weight"), sample().at("encoder.weight")));
  const std::string m = error_of([&] { file.read("encoder.bias"); });
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_NE(m.find("'encoder.bias'"), std::string::npos) << m;
  EXPECT_NE(m.find("corrupted"), std::string::npos) << m;
}

TEST(Checksum, ReaderOfAFileTruncatedWhileOpenSaysSo) {
  std::string path = checksum_tmp_path("reader_shrunk.safetensors");
  safetensors::save(path, sample());
  const std::string good = read_file(path);
  const safetensors::Reader file(path);
  ASSERT_EQ(::truncate(path.c_str(), off_t(data_start(good, "encoder.weight") + 4)), 0);
  const std::string m = error_of([&] { file.read("encoder.weight"); });
  EXPECT_EQ(m.rfind(path, 0), 0u) << m;
  EXPECT_NE(m.find("unexpected end of file"), std::string::npos) << m;
  EXPECT_NE(m.find("tensor 'encoder.weight'"), std::string::npos) << m;
}

// save() streams the file to disk tensor by tensor; serialize() builds it in memory. Same bytes,
// including a non-contiguous tensor (written as its row-major copy).
TEST(Checksum, SaveWritesExactlyWhatSerializeBuilds) {
  auto tensors = sample();
  tensors["transposed"] = qkv::testing::randn({3, 4}, 9).as_strided({4, 3}, {1, 4}, 0);
  const std::map<std::string, std::string> meta{{"format", "pt"}};
  std::string path = checksum_tmp_path("streamed.safetensors");
  safetensors::save(path, tensors, meta);
  EXPECT_EQ(read_file(path), safetensors::serialize(tensors, meta));
  EXPECT_TRUE(qkv::testing::bit_equal(safetensors::load(path).tensors.at("transposed"), tensors.at("transposed").contiguous()));
}
