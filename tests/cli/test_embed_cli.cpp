// `qkv embed` (src/cli/cmd_embed.cpp) over the reference BERT directory of
// tools/refs/models_bert.py: one valid JSON array per input line, as many lines as inputs, each
// float printed so that it reads back to the vector PyTorch computed (f32: rtol 1e-5, atol 1e-6);
// the load report on stderr; a bad --pooling fails; an input cut to the model's positions is
// named on stderr; a directory given as the input is named as one.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "qkv/util/file.h"
#include "ref.h"
#include "run_qkv.h"

using namespace qkv;
using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("qkv_embed_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// Runs qkv embed on the case's inputs; returns the parsed output lines (and fails on a bad line).
std::vector<nlohmann::json> embed(const RefFile& ref, const std::string& c, const std::vector<std::string>& flags,
                                  std::string* log_text = nullptr) {
  auto p = ref.params(c);
  const fs::path dir = scratch(c);
  std::string lines;
  for (size_t i = 0; i < p["texts"].size(); ++i)
    lines += p["texts"][i].get<std::string>() + (p["pairs"].is_null() ? "" : "\t" + p["pairs"][i].get<std::string>()) + "\n";
  write_file_atomic((dir / "in.txt").string(), lines);
  std::vector<std::string> args{"embed", "--model", (fs::path(ref_dir()) / p["dir"].get<std::string>()).string(),
                                "--input", (dir / "in.txt").string()};
  args.insert(args.end(), flags.begin(), flags.end());
  EXPECT_EQ(run_qkv(args, dir / "log.txt", (dir / "out.txt").string()), 0) << read_file((dir / "log.txt").string());
  if (log_text) *log_text = read_file((dir / "log.txt").string());
  std::vector<nlohmann::json> out;
  std::istringstream in(read_file((dir / "out.txt").string()));
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));  // throws if invalid
  return out;
}

Tensor as_tensor(const std::vector<nlohmann::json>& rows) {
  std::vector<float> flat;
  for (auto& r : rows)
    for (auto& v : r) flat.push_back(v.get<float>());
  return Tensor::from_vector(flat, {int64_t(rows.size()), int64_t(rows.at(0).size())});
}

}  // namespace

TEST(EmbedCli, PrintsOneJsonArrayPerInputThatReadsBackToTorchsVector) {
  RefFile ref("models_bert");
  std::string log;
  auto mean = embed(ref, "embed_single", {"--pooling", "mean", "--normalize"}, &log);
  ASSERT_EQ(mean.size(), ref.params("embed_single")["texts"].size());
  for (auto& row : mean) {
    ASSERT_TRUE(row.is_array());
    ASSERT_EQ(row.size(), 32u);
  }
  EXPECT_CLOSE(as_tensor(mean), ref.get("embed_single", "mean_normalized"), kF32);
  EXPECT_NE(log.find("loaded"), std::string::npos) << log;
  EXPECT_NE(log.find("ignored: cls.seq_relationship.weight"), std::string::npos) << log;  // heads not used
  auto cls = embed(ref, "embed_pairs", {"--pooling", "cls"});
  ASSERT_EQ(cls.size(), ref.params("embed_pairs")["texts"].size());
  EXPECT_CLOSE(as_tensor(cls), ref.get("embed_pairs", "cls"), kF32);
}

TEST(EmbedCli, AnUnknownPoolingFails) {
  RefFile ref("models_bert");
  const fs::path dir = scratch("bad");
  write_file_atomic((dir / "in.txt").string(), "w1 w2\n");
  EXPECT_NE(run_qkv({"embed", "--model", (fs::path(ref_dir()) / "models_bert/pretraining").string(), "--pooling", "max",
                     "--input", (dir / "in.txt").string()},
                    dir / "log.txt"),
            0);
}

// The reference model has 16 positions: a longer input is embedded cut to them (the vector of the
// cut text alone, to f32 rounding), and stderr names its file and line.
TEST(EmbedCli, AnInputCutToTheModelsPositionsIsNamedOnStderr) {
  RefFile ref("models_bert");
  const fs::path dir = scratch("long");
  const std::string model = (fs::path(ref_dir()) / "models_bert/pretraining").string();
  std::string long_line, cut_line;
  for (int i = 0; i < 30; ++i) long_line += std::string(i ? " " : "") + (i % 2 ? "w2" : "w1");
  for (int i = 0; i < 14; ++i) cut_line += std::string(i ? " " : "") + (i % 2 ? "w2" : "w1");  // + [CLS] [SEP] = 16
  write_file_atomic((dir / "in.txt").string(), "w1 w2\n" + long_line + "\n" + cut_line + "\n");
  ASSERT_EQ(run_qkv({"embed", "--model", model, "--input", (dir / "in.txt").string()}, dir / "log.txt",
                    (dir / "out.txt").string()),
            0);
  const std::string log = read_file((dir / "log.txt").string());
  EXPECT_NE(log.find("warning: " + (dir / "in.txt").string() + ":2: input truncated to 16 tokens"), std::string::npos)
      << log;
  EXPECT_EQ(log.find(":3: input truncated"), std::string::npos) << log;  // exactly 16: not cut
  std::istringstream out(read_file((dir / "out.txt").string()));
  std::vector<std::string> lines;
  for (std::string l; std::getline(out, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 3u);
  const nlohmann::json cut = nlohmann::json::parse(lines[1]), alone = nlohmann::json::parse(lines[2]);
  ASSERT_EQ(cut.size(), alone.size());
  for (size_t i = 0; i < cut.size(); ++i)  // the same row at another place in the batch: rounding only
    EXPECT_NEAR(cut[i].get<double>(), alone[i].get<double>(), 1e-5 * std::max(1.0, std::abs(alone[i].get<double>())));
  fs::copy(model, dir / "bare", fs::copy_options::recursive);  // without its vocab.txt: the directory is named
  ASSERT_TRUE(fs::remove(dir / "bare" / "vocab.txt"));
  EXPECT_NE(run_qkv({"embed", "--model", (dir / "bare").string(), "--input", (dir / "in.txt").string()},
                    dir / "bare.log"),
            0);
  EXPECT_NE(read_file((dir / "bare.log").string()).find((dir / "bare").string() + ": has no tokenizer"),
            std::string::npos)
      << read_file((dir / "bare.log").string());
  EXPECT_NE(run_qkv({"embed", "--model", model, "--input", dir.string()}, dir / "dir.log"), 0);
  EXPECT_NE(read_file((dir / "dir.log").string()).find(dir.string() + ": is a directory"), std::string::npos)
      << read_file((dir / "dir.log").string());
}
