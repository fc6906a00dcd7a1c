// Usage errors exit 2 for every command, as an unknown command does: an unknown option, a value
// that is not of the option's type, a missing required option. CLI11's own codes (105, 106, 109)
// differed by the kind of mistake and could not be told from a failure of the command. `--help`
// still exits 0 and prints the options to stdout.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "qkv/util/file.h"
#include "run_qkv.h"

namespace fs = std::filesystem;
using qkv::read_file;
using qkv::testing::run_qkv;

namespace {

fs::path scratch() {
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_usage_" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir;
}

// The command names that `qkv --help` lists (two-space indent, name, help text).
std::vector<std::string> listed_commands(const fs::path& dir) {
  const fs::path out = dir / "help.txt";
  EXPECT_EQ(run_qkv({"--help"}, dir / "help.log", out.string()), 0);
  std::vector<std::string> names;
  std::istringstream lines(read_file(out.string()));
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("  ", 0) != 0) continue;
    std::istringstream words(line);
    std::string name;
    words >> name;
    names.push_back(name);
  }
  return names;
}

}  // namespace

TEST(UsageErrors, AnUnknownOptionExitsTwoForEveryCommand) {
  const fs::path dir = scratch();
  const auto names = listed_commands(dir);
  ASSERT_GE(names.size(), 20u) << "qkv --help listed too few commands";
  for (const auto& name : names) {
    const fs::path log = dir / (name + ".log");
    EXPECT_EQ(run_qkv({name, "--no-such-option"}, log), 2) << name;
    EXPECT_NE(read_file(log.string()).find("--no-such-option"), std::string::npos) << name << ": "
                                                                                     << read_file(log.string());
  }
  fs::remove_all(dir);
}

TEST(UsageErrors, BadValuesAndMissingOptionsExitTwoAndHelpExitsZero) {
  const fs::path dir = scratch();
  const fs::path log = dir / "log", out = dir / "out";
  // A value that is not an integer (CLI11: ConversionError, was 106 or 105).
  EXPECT_EQ(run_qkv({"translate", "--model", dir.string(), "--beam", "four"}, log), 2);
  EXPECT_NE(read_file(log.string()).find("--beam"), std::string::npos) << read_file(log.string());
  // A value outside the option's range, and one that is not finite: a plain message.
  EXPECT_EQ(run_qkv({"translate", "--model", dir.string(), "--beam", "0"}, log), 2);
  EXPECT_NE(read_file(log.string()).find("--beam: must be a positive number, got '0'"), std::string::npos)
      << read_file(log.string());
  EXPECT_EQ(run_qkv({"demo-mlp", "--lr", "inf"}, log), 2);
  EXPECT_NE(read_file(log.string()).find("--lr: must be a positive number, got 'inf'"), std::string::npos)
      << read_file(log.string());
  EXPECT_EQ(run_qkv({"translate", "--model", dir.string(), "--top-k", "-1"}, log), 2);
  EXPECT_NE(read_file(log.string()).find("--top-k"), std::string::npos) << read_file(log.string());
  // --probs without --json was ignored (classify's --all-probs was already refused so).
  EXPECT_EQ(run_qkv({"tag", "--model", dir.string(), "--probs"}, log), 2);
  EXPECT_NE(read_file(log.string()).find("--probs requires --json"), std::string::npos) << read_file(log.string());
  // --nbest wider than --beam: named with both flags before the model or the input is read (it
  // was "decode: nbest must be in [1, beam]" once every line had been read).
  EXPECT_NE(run_qkv({"translate", "--model", (dir / "no-such-model").string(), "--nbest", "3", "--beam", "2"}, log), 0);
  EXPECT_NE(read_file(log.string()).find("--nbest 3 needs a beam at least as wide: give --beam 3 or more (now 2)"),
            std::string::npos)
      << read_file(log.string());
  EXPECT_NE(run_qkv({"translate", "--model", (dir / "no-such-model").string(), "--nbest", "4", "--beam", "4",
                     "--patience", "0.5"},
                    log),
            0);
  EXPECT_NE(read_file(log.string()).find("--nbest 4 needs round(--patience x --beam) >= 4 (now round(0.5 x 4) = "
                                         "2): beam search stops once that many hypotheses have ended; give "
                                         "--patience 1 or more"),
            std::string::npos)
      << read_file(log.string());
  // qkv answer's window flags: 0 or below used to fall back silently to the model's qa.json.
  for (const char* flag : {"--max-len", "--doc-stride", "--max-answer-length"}) {
    EXPECT_EQ(run_qkv({"answer", "--model", dir.string(), flag, "0"}, log), 2) << flag;
    EXPECT_NE(read_file(log.string()).find(std::string(flag) + ": must be a positive number, got '0'"),
              std::string::npos)
        << read_file(log.string());
  }
  // A seed below 0 or past 2^64 - 1 (CLI11 wrapped or saturated them into seeds).
  for (const char* bad : {"-1", "18446744073709551616", "99999999999999999999", "1e3"})
    for (const char* cmd : {"generate", "translate"}) {
      EXPECT_EQ(run_qkv({cmd, "--model", dir.string(), "--seed", bad}, log), 2) << cmd << " " << bad;
      EXPECT_NE(read_file(log.string()).find("--seed: must be an integer in [0, 18446744073709551615], got '" +
                                             std::string(bad) + "'"),
                std::string::npos)
          << read_file(log.string());
    }
  EXPECT_NE(run_qkv({"generate", "--model", dir.string(), "--seed", "18446744073709551615"}, log), 2)
      << read_file(log.string());  // the largest seed passes the flag's check (then the missing model fails)
  // A required option left out (CLI11: RequiredError, was 106).
  EXPECT_EQ(run_qkv({"translate"}, log), 2);
  EXPECT_NE(read_file(log.string()).find("--model"), std::string::npos) << read_file(log.string());
  // A mistyped required option is reported as the unexpected argument, not as the missing one.
  EXPECT_EQ(run_qkv({"translate", "--modle", dir.string()}, log), 2);
  EXPECT_NE(read_file(log.string()).find("--modle"), std::string::npos) << read_file(log.string());
  // A stray positional argument (CLI11: ExtrasError, was 109).
  EXPECT_EQ(run_qkv({"info", "stray"}, log), 2);
  EXPECT_NE(read_file(log.string()).find("stray"), std::string::npos) << read_file(log.string());
  // A resumed run keeps its own config and data: flags that would be ignored are refused.
  EXPECT_EQ(run_qkv({"train", "--resume", dir.string(), "--config", "c.json"}, log), 2);
  EXPECT_NE(read_file(log.string()).find("--config excludes --resume"), std::string::npos) << read_file(log.string());
  EXPECT_EQ(run_qkv({"train", "--resume", dir.string(), "--out", "elsewhere"}, log), 2);
  // Asking for help is not an error.
  EXPECT_EQ(run_qkv({"translate", "--help"}, log, out.string()), 0);
  EXPECT_NE(read_file(out.string()).find("--beam"), std::string::npos) << read_file(out.string());
  EXPECT_EQ(run_qkv({"no-such-command"}, log), 2);
  fs::remove_all(dir);
}

// --set and --list choose a translation corpus's packages: another corpus ignored them silently.
// Refused before anything is read or built.
TEST(UsageErrors, DataSetAndListApplyToTranslationCorporaOnly) {
  const fs::path dir = scratch();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"data", "sentiment", "--set", "large"},
        std::vector<std::string>{"data", "lm-en", "--list", "packages.txt"}}) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--dir", (dir / "data").string()});
    EXPECT_EQ(run_qkv(a, dir / "data.log"), 1) << args[1];
    const std::string log = read_file((dir / "data.log").string());
    EXPECT_NE(log.find(" applies to the mt-en-de and mt-en-fr corpora, not " + args[1]), std::string::npos) << log;
    EXPECT_FALSE(fs::exists(dir / "data")) << args[1];
  }
}
