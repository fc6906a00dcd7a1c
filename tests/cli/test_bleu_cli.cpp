// `qkv bleu --by-source-length SRC` scores each source-length bucket (1-5, 6-10, 11-20, 21+ 13a
// tokens) as its own corpus. Expected values follow from BLEU's definition: a bucket whose
// hypotheses equal their references scores 100, one with no matching unigram scores 0 without
// smoothing, an empty bucket reports 0 sentences. The whole-corpus line is unchanged.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "qkv/util/file.h"
#include "run_qkv.h"

namespace fs = std::filesystem;
using qkv::testing::run_qkv;

namespace {
void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }
}  // namespace

TEST(BleuCli, ScoresBySourceLengthBucket) {
  fs::path dir = fs::path(::testing::TempDir()) / ("qkv_bleu_buckets_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // Source lengths in 13a tokens: 3 ("Hello , world"), 2, 7, 22.
  std::string long_src, long_ref;
  for (int i = 0; i < 22; ++i) long_src += "w" + std::to_string(i) + " ", long_ref += "x" + std::to_string(i) + " ";
  write(dir / "src", "Hello, world\nopen file\none two three four five six seven\n" + long_src + "\n");
  write(dir / "ref", "Hallo Welt und mehr\nDatei jetzt öffnen bitte\neins zwei drei vier fünf sechs sieben\n" +
                         long_ref + "\n");
  write(dir / "hyp", "Hallo Welt und mehr\nDatei jetzt öffnen bitte\nfoo bar baz qux\n" + long_ref + "\n");
  ASSERT_EQ(run_qkv({"bleu", "--hyp", (dir / "hyp").string(), "--ref", (dir / "ref").string(), "--smooth", "none",
                     "--chrf", "--by-source-length", (dir / "src").string()},
                    dir / "log", (dir / "out").string()),
            0)
      << qkv::read_file((dir / "log").string());
  std::string out = qkv::read_file((dir / "out").string());
  EXPECT_NE(out.find("source length 1-5        2 sentences  BLEU 100.00  chrF 100.00"), std::string::npos) << out;
  EXPECT_NE(out.find("source length 6-10       1 sentences  BLEU   0.00"), std::string::npos) << out;
  EXPECT_NE(out.find("source length 11-20      0 sentences  BLEU   0.00"), std::string::npos) << out;
  EXPECT_NE(out.find("source length 21+        1 sentences  BLEU 100.00  chrF 100.00"), std::string::npos) << out;

  // The corpus line is what plain `qkv bleu` prints.
  ASSERT_EQ(run_qkv({"bleu", "--hyp", (dir / "hyp").string(), "--ref", (dir / "ref").string(), "--smooth", "none",
                     "--chrf"},
                    dir / "log", (dir / "plain").string()),
            0);
  EXPECT_EQ(out.substr(0, out.find("source length")), qkv::read_file((dir / "plain").string()));

  // A source with another line count is refused, naming the file.
  write(dir / "short_src", "one line\n");
  EXPECT_NE(run_qkv({"bleu", "--hyp", (dir / "hyp").string(), "--ref", (dir / "ref").string(), "--by-source-length",
                     (dir / "short_src").string()},
                    dir / "log"),
            0);
  std::string log = qkv::read_file((dir / "log").string());
  EXPECT_NE(log.find("short_src"), std::string::npos) << log;
}

// Invalid UTF-8 in any input is named by file and line: among three references the scorer said only
// "reference, segment 1", and in the source file nothing at all.
TEST(BleuCli, InvalidUtf8IsNamedByFileAndLine) {
  fs::path dir = fs::path(::testing::TempDir()) / ("qkv_bleu_utf8_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  write(dir / "good", "a b c\nd e f\n");
  write(dir / "bad", "a b c\nd \xff f\n");
  write(dir / "blank2", "a b c\n\n");
  struct Case {
    std::vector<std::string> args;
    std::string want;
  } cases[] = {
      {{"--hyp", (dir / "good").string(), "--ref", (dir / "good").string(), "--ref", (dir / "bad").string()},
       (dir / "bad").string() + ":2: not valid UTF-8 (byte 3 of the line)"},
      {{"--hyp", (dir / "bad").string(), "--ref", (dir / "good").string()},
       (dir / "bad").string() + ":2: not valid UTF-8"},
      {{"--hyp", (dir / "good").string(), "--ref", (dir / "good").string(), "--by-source-length",
        (dir / "bad").string()},
       (dir / "bad").string() + ":2: not valid UTF-8"},
      // a segment with no reference names the files (it was "corpus_bleu: segment 2: ...")
      {{"--hyp", (dir / "good").string(), "--ref", (dir / "blank2").string()},
       "line 2 is empty in every reference (" + (dir / "blank2").string() + ")"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args{"bleu"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    EXPECT_EQ(run_qkv(args, dir / "log"), 1);
    const std::string log = qkv::read_file((dir / "log").string());
    EXPECT_NE(log.find(c.want), std::string::npos) << log;
  }
  fs::remove_all(dir);
}
