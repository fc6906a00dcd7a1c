// qkv as a library: `cmake --install` gives a tree that another CMake project finds with
// find_package(qkv) and links as qkv::qkv; examples/ built that way (only the installed headers
// and libraries) loads a trained model and translates exactly as `qkv translate` does, and loads a
// GPT directory and completes prompts exactly as `qkv generate` does (greedy, beam 4, top-p).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "qkv/io/gpt2.h"
#include "qkv/text/char_word.h"
#include "qkv/util/file.h"
#include "ref.h"
#include "reversal_corpus.h"
#include "run_qkv.h"

namespace fs = std::filesystem;
using qkv::testing::run_program;
using qkv::testing::run_qkv;

namespace {

std::vector<std::string> lines_of(const fs::path& file) {
  std::istringstream in(qkv::read_file(file.string()));
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// Trains a small Transformer on the reversal task for a few steps: any model will do.
fs::path train_model(const fs::path& dir) {
  qkv::testing::write_reversal_corpus(dir, 120, 100, 99);
  qkv::write_file_atomic((dir / "config.json").string(), R"({
    "model_type": "transformer",
    "model": {"d_model": 16, "heads": 2, "enc_layers": 1, "dec_layers": 1, "d_ff": 32, "dropout": 0.0, "max_len": 32},
    "tokenizer": {"kind": "bpe", "vocab_size": 60, "min_frequency": 1},
    "data": {"max_tokens": 64, "max_sentences": 16},
    "schedule": {"type": "constant", "lr": 0.003},
    "train": {"max_steps": 30, "save_every": 30, "valid_every": 0},
    "seed": 1
  })");
  const fs::path log = dir / "train.log";
  EXPECT_EQ(run_qkv({"train", "--config", (dir / "config.json").string(), "--train", (dir / "train.tsv").string(),
                     "--valid", (dir / "valid.tsv").string(), "--out", (dir / "run").string()},
                    log),
            0)
      << qkv::read_file(log.string());
  return dir / "run" / "model";
}

// The gpt_generate reference GPT-2 with a 97-symbol character tokenizer, saved as a model directory.
fs::path gpt_model(const fs::path& dir) {
  qkv::testing::RefFile ref("gpt_generate");
  qkv::io::GptBundle b = qkv::io::load_gpt2(
      (fs::path(qkv::testing::ref_dir()) / ref.params("gen_gpt2")["dir"].get<std::string>()).string());
  std::vector<std::string> vocab = {"<unk>", "\n"};
  for (char c = 32; c < 127; ++c) vocab.push_back(std::string(1, c));
  b.tokenizer = std::make_shared<qkv::text::VocabTokenizer>(qkv::text::VocabTokenizer::Level::Char, vocab, "<unk>");
  qkv::io::save_gpt2((dir / "gpt").string(), b);
  return dir / "gpt";
}

// A line of `qkv generate` (newlines and backslashes escaped) back to the text.
std::string unescaped(const std::string& s) {
  std::string o;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) o += s[++i] == 'n' ? '\n' : s[i];
    else o += s[i];
  }
  return o;
}

}  // namespace

TEST(LibraryPackage, InstalledTreeBuildsTheExamplesWhichTranslateAndGenerateLikeTheCli) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_package_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string cmake = QKV_CMAKE_COMMAND;
  const fs::path prefix = dir / "prefix", ex_build = dir / "example-build", log = dir / "step.log";
  auto read_log = [&] { return qkv::read_file(log.string()); };

  // 1. Install the build tree into a fresh prefix.
  ASSERT_EQ(run_program({cmake, "--install", QKV_BINARY_DIR, "--prefix", prefix.string()}, log), 0) << read_log();
  ASSERT_TRUE(fs::exists(prefix / "include/qkv/tasks/translator.h"));
  ASSERT_TRUE(fs::exists(prefix / "lib/cmake/qkv/qkvConfig.cmake"));
  ASSERT_TRUE(fs::exists(prefix / "bin/qkv"));

  // 2. An outside project: examples/ configured on its own, finding qkv only through the prefix.
  const std::string flags = QKV_SANITIZE_FLAGS;
  ASSERT_EQ(run_program({cmake, "-S", std::string(QKV_SOURCE_DIR) + "/examples", "-B", ex_build.string(),
                         "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_PREFIX_PATH=" + prefix.string(),
                         "-DCMAKE_CXX_FLAGS=" + flags, "-DCMAKE_EXE_LINKER_FLAGS=" + flags},
                        log),
            0)
      << read_log();
  ASSERT_NE(qkv::read_file((ex_build / "CMakeCache.txt").string()).find("qkv_DIR:PATH=" + (prefix / "lib/cmake/qkv").string()),
            std::string::npos)
      << "the example must find the installed package, not the build tree";
  ASSERT_EQ(run_program({cmake, "--build", ex_build.string()}, log), 0) << read_log();

  // 3. Its output equals the installed program's, greedy and beam 4, on three sentences.
  const fs::path model = train_model(dir);
  const std::vector<std::string> src{"alpha beta gamma", "delta eps", "zeta eta theta iota"};
  std::vector<std::string> args{(ex_build / "qkv_example_translate").string(), model.string()};
  args.insert(args.end(), src.begin(), src.end());
  const fs::path ex_out = dir / "example.out";
  ASSERT_EQ(run_program(args, log, ex_out.string()), 0) << read_log();
  const auto ex = lines_of(ex_out);
  ASSERT_EQ(ex.size(), 3 * src.size()) << qkv::read_file(ex_out.string());

  qkv::write_file_atomic((dir / "src.txt").string(), src[0] + "\n" + src[1] + "\n" + src[2] + "\n");
  for (const char* beam : {"1", "4"}) {
    const fs::path out = dir / (std::string("cli-beam") + beam + ".out");
    ASSERT_EQ(run_program({(prefix / "bin/qkv").string(), "translate", "--model", model.string(), "--input",
                           (dir / "src.txt").string(), "--beam", beam},
                          log, out.string()),
              0)
        << read_log();
    const auto cli = lines_of(out);
    ASSERT_EQ(cli.size(), src.size());
    const std::string label = beam == std::string("1") ? "  greedy: " : "  beam 4: ";
    for (size_t i = 0; i < src.size(); ++i) {
      EXPECT_EQ(ex[3 * i], src[i]);
      EXPECT_EQ(ex[3 * i + (beam == std::string("1") ? 1 : 2)], label + cli[i]) << "sentence " << i;
    }
  }

  // 4. The generation example's output equals the installed program's: greedy, 4 beams, top-p.
  const fs::path gpt = gpt_model(dir);
  const std::vector<std::string> prompts{"the cat", "Hello, world"};
  const fs::path gen_out = dir / "generate.out";
  ASSERT_EQ(run_program({(ex_build / "qkv_example_generate").string(), gpt.string(), prompts[0], prompts[1]}, log,
                        gen_out.string()),
            0)
      << read_log();
  qkv::write_file_atomic((dir / "prompts.txt").string(), prompts[0] + "\n" + prompts[1] + "\n");
  std::vector<std::vector<std::string>> cli;
  for (const std::vector<std::string>& how :
       {std::vector<std::string>{}, {"--beams", "4"}, {"--sample", "--top-p", "0.9", "--seed", "1"}}) {
    std::vector<std::string> a{(prefix / "bin/qkv").string(), "generate", "--model", gpt.string(), "--input",
                               (dir / "prompts.txt").string(), "-n", "20"};
    a.insert(a.end(), how.begin(), how.end());
    const fs::path out = dir / "cli-generate.out";
    ASSERT_EQ(run_program(a, log, out.string()), 0) << read_log();
    cli.push_back(lines_of(out));
    ASSERT_EQ(cli.back().size(), prompts.size());
  }
  std::string want;
  for (size_t i = 0; i < prompts.size(); ++i)
    want += prompts[i] + "\n  greedy: " + unescaped(cli[0][i]) + "\n  beam 4: " + unescaped(cli[1][i]) +
            "\n  top-p:  " + unescaped(cli[2][i]) + "\n";
  EXPECT_EQ(qkv::read_file(gen_out.string()), want);
  EXPECT_NE(cli[0], cli[1]) << "beam search chose as greedy did";
  fs::remove_all(dir);
}
