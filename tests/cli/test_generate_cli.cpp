// `qkv generate` end to end on a small GPT directory written here (the gpt_generate reference
// model with a 97-symbol character tokenizer): one prompt streams the library's completion; a file
// of prompts gives one completion per line in input order, whatever the batch size; sampling flags,
// the logit bias and stop strings reach the library; beam search and several completions per
// prompt give the library's, N lines per prompt; --logprobs gives the library's log-probabilities
// as JSON lines; a missing model directory, a too-long prompt and bad values fail with a message
// naming them.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <nlohmann/json.hpp>

#include "qkv/io/gpt2.h"
#include "qkv/kernels/bf16.h"
#include "qkv/tasks/generator.h"
#include "qkv/text/char_word.h"
#include "qkv/util/file.h"
#include "ref.h"
#include "run_qkv.h"

using namespace qkv;
using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

fs::path make_model_dir() {
  RefFile ref("gpt_generate");
  io::GptBundle b = io::load_gpt2((fs::path(ref_dir()) / ref.params("gen_gpt2")["dir"].get<std::string>()).string());
  std::vector<std::string> vocab = {"<unk>", "\n"};
  for (char c = 32; c < 127; ++c) vocab.push_back(std::string(1, c));  // 97 symbols, the model's vocabulary
  b.tokenizer = std::make_shared<text::VocabTokenizer>(text::VocabTokenizer::Level::Char, vocab, "<unk>");
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_generate_cli_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  io::save_gpt2((dir / "model").string(), b);
  return dir;
}

std::string escaped(const std::string& s) {
  std::string o;
  for (char c : s) o += c == '\n' ? std::string("\\n") : c == '\\' ? std::string("\\\\") : std::string(1, c);
  return o;
}

}  // namespace

TEST(GenerateCli, StreamsOnePromptAndAnswersAFileLineByLine) {
  const fs::path dir = make_model_dir();
  const std::string model = (dir / "model").string();
  tasks::Generator lib(model);
  tasks::GenerateOptions o;
  o.max_new_tokens = 12;

  // One prompt: the completion and a newline.
  ASSERT_EQ(run_qkv({"generate", "--model", model, "--prompt", "the cat", "--max-new-tokens", "12"}, dir / "one.log",
                    (dir / "one.out").string()), 0) << read_file((dir / "one.log").string());
  EXPECT_EQ(read_file((dir / "one.out").string()), lib.generate({"the cat"}, o)[0].text + "\n");

  // A file of prompts, sampled, batch 2: line i answers prompt i, as the library does.
  const std::vector<std::string> prompts = {"a", "hello there, world", "xyz"};
  write_file_atomic((dir / "prompts.txt").string(), "a\nhello there, world\nxyz\n");
  ASSERT_EQ(run_qkv({"generate", "--model", model, "--input", (dir / "prompts.txt").string(), "--sample", "--seed",
                     "3", "--top-k", "10", "--top-p", "0.9", "--temperature", "0.8", "--repetition-penalty", "1.2",
                     "--presence-penalty", "0.4", "--frequency-penalty", "0.3", "--no-repeat-ngram", "3", "--min-new-tokens",
                     "4", "--batch-size", "2", "-n", "12", "--logit-bias", "70=2.5", "--logit-bias", "3=-1e2"},
                    dir / "many.log", (dir / "many.out").string()), 0)
      << read_file((dir / "many.log").string());
  o.sample = true;
  o.seed = 3;
  o.logits = {0.8, 10, 0.9, 1.2, 0.4, 0.3};
  o.no_repeat_ngram_size = 3, o.min_new_tokens = 4;
  o.logits.logit_bias = {{70, 2.5}, {3, -100.0}};
  auto r = lib.generate(prompts, o);
  std::string want;
  for (auto& g : r) want += escaped(g.text) + "\n";
  EXPECT_EQ(read_file((dir / "many.out").string()), want);

  // A stop string: the one-prompt output ends before it.
  o = {};
  o.max_new_tokens = 12;
  const std::string free_text = lib.generate({"the cat"}, o)[0].text;
  ASSERT_GE(free_text.size(), 6u);
  const std::string stop = free_text.substr(3, 2);
  ASSERT_EQ(run_qkv({"generate", "--model", model, "--prompt", "the cat", "-n", "12", "--stop", "zzzz", "--stop", stop},
                    dir / "stop.log", (dir / "stop.out").string()), 0) << read_file((dir / "stop.log").string());
  EXPECT_EQ(read_file((dir / "stop.out").string()), free_text.substr(0, free_text.find(stop)) + "\n");
}

// --beams K --num-return N: beam search's N best per prompt, prompt i's j-th on line i * N + j + 1,
// as the library gives them (one prompt is printed at the end, not streamed); with --logprobs
// each JSON line carries the hypothesis's score. --num-return with --sample: N samples.
TEST(GenerateCli, BeamSearchAndSeveralCompletionsPerPrompt) {
  const fs::path dir = make_model_dir();
  const std::string model = (dir / "model").string();
  tasks::Generator lib(model);
  tasks::GenerateOptions o;
  o.max_new_tokens = 10, o.num_beams = 3, o.num_return_sequences = 2, o.length_penalty = 0.5;
  o.early_stopping = tasks::GenerateOptions::EarlyStopping::never, o.eos_id = 40;
  const std::vector<std::string> prompts = {"a", "hello there, world"};
  write_file_atomic((dir / "prompts.txt").string(), "a\nhello there, world\n");
  const std::vector<std::string> beam = {"--beams", "3", "--num-return", "2", "--length-penalty", "0.5",
                                         "--early-stopping", "never", "--eos-id", "40", "-n", "10"};
  auto args = [&](std::vector<std::string> a, const std::vector<std::string>& more) {
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  ASSERT_EQ(run_qkv(args({"generate", "--model", model, "--input", (dir / "prompts.txt").string()}, beam),
                    dir / "beam.log", (dir / "beam.out").string()), 0) << read_file((dir / "beam.log").string());
  const auto r = lib.generate(prompts, o);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_NE(r[0].text, r[1].text);
  std::string want;
  for (auto& g : r) want += escaped(g.text) + "\n";
  EXPECT_EQ(read_file((dir / "beam.out").string()), want);

  ASSERT_EQ(run_qkv(args({"generate", "--model", model, "--prompt", "a", "--logprobs", "0"}, beam), dir / "lp.log",
                    (dir / "lp.out").string()), 0) << read_file((dir / "lp.log").string());
  const auto alone = lib.generate({"a"}, o);  // a batch of one: the same bits as the command's
  std::istringstream lines(read_file((dir / "lp.out").string()));
  std::string line;
  for (size_t j = 0; j < 2; ++j) {
    ASSERT_TRUE(std::getline(lines, line));
    const nlohmann::json got = nlohmann::json::parse(line);
    EXPECT_EQ(got["text"], alone[j].text);
    EXPECT_EQ(got["finish"], alone[j].finish);
    EXPECT_EQ(got["score"].get<double>(), alone[j].score);
    EXPECT_EQ(got["logprobs"]["token_logprobs"].size(), alone[j].tokens.size());
  }
  EXPECT_FALSE(std::getline(lines, line));

  ASSERT_EQ(run_qkv({"generate", "--model", model, "--prompt", "a", "--sample", "--seed", "5", "--num-return", "3",
                     "-n", "6"}, dir / "n.log", (dir / "n.out").string()), 0) << read_file((dir / "n.log").string());
  tasks::GenerateOptions s;
  s.sample = true, s.seed = 5, s.num_return_sequences = 3, s.max_new_tokens = 6;
  want.clear();
  for (auto& g : lib.generate({"a"}, s)) want += escaped(g.text) + "\n";
  EXPECT_EQ(read_file((dir / "n.out").string()), want);
}

// --logprobs N [--prompt-logprobs]: one JSON line per prompt with the library's text, finish and
// log-probabilities (the same doubles), the prompt's tokens first when asked (the first with null).
TEST(GenerateCli, LogprobsAreJsonLinesOfTheLibrarysValues) {
  const fs::path dir = make_model_dir();
  const std::string model = (dir / "model").string();
  tasks::Generator lib(model);
  tasks::GenerateOptions o;
  o.max_new_tokens = 6, o.logprobs = 2, o.prompt_logprobs = true;
  const std::vector<std::string> prompts = {"the cat", "hello"};
  const auto want = lib.generate(prompts, o);
  write_file_atomic((dir / "lp.txt").string(), "the cat\nhello\n");
  for (bool with_prompt : {false, true}) {
    std::vector<std::string> args = {"generate", "--model", model, "--input", (dir / "lp.txt").string(), "-n", "6",
                                     "--logprobs", "2"};
    if (with_prompt) args.push_back("--prompt-logprobs");
    ASSERT_EQ(run_qkv(args, dir / "lp.log", (dir / "lp.out").string()), 0) << read_file((dir / "lp.log").string());
    std::istringstream out(read_file((dir / "lp.out").string()));
    std::string line;
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_TRUE(std::getline(out, line)) << i;
      const nlohmann::json j = nlohmann::json::parse(line);
      EXPECT_EQ(j["text"], want[i].text);
      EXPECT_EQ(j["finish"], want[i].finish);
      const auto& lp = j["logprobs"];
      const size_t first = with_prompt ? prompts[i].size() : 0;  // a character tokenizer: a token a character
      ASSERT_EQ(lp["token_logprobs"].size(), first + want[i].tokens.size()) << line;
      if (with_prompt) {
        EXPECT_TRUE(lp["token_logprobs"][0].is_null());
        EXPECT_EQ(lp["tokens"][0], prompts[i].substr(0, 1));
        for (size_t k = 1; k < first; ++k)
          EXPECT_EQ(lp["token_logprobs"][k].get<double>(), want[i].prompt_logprobs[k - 1].logprob) << k;
      }
      for (size_t k = 0; k < want[i].tokens.size(); ++k) {
        EXPECT_EQ(lp["token_logprobs"][first + k].get<double>(), want[i].logprobs[k].logprob) << k;
        EXPECT_EQ(lp["top_logprobs"][first + k].size(), 2u);
      }
    }
    EXPECT_FALSE(std::getline(out, line)) << line;
  }
  // --prompt-logprobs needs --logprobs (a usage error).
  EXPECT_EQ(run_qkv({"generate", "--model", model, "--prompt", "ab", "--prompt-logprobs"}, dir / "u.log"), 2);
}

// --precision bf16 reaches the library (GenerateOptions::precision): the command prints what the
// library generates in bf16 with the weights held in bf16 (Generator::hold_weights_in_bf16).
TEST(GenerateCli, PrecisionBf16ReachesTheLibrary) {
  if (!kernels::dnnl_cpu_info().bf16_native())
    GTEST_SKIP() << "oneDNN has no bf16 kernel here (" << kernels::dnnl_cpu_info().isa << "); the refusal is tested "
                 << "in test_info_cli";
  const fs::path dir = make_model_dir();
  const std::string model = (dir / "model").string();
  tasks::Generator lib(model);
  lib.hold_weights_in_bf16();
  tasks::GenerateOptions o;
  o.max_new_tokens = 12;
  o.precision = kernels::MatmulPrecision::bf16;
  ASSERT_EQ(run_qkv({"generate", "--model", model, "--prompt", "the cat", "-n", "12", "--precision", "bf16"},
                    dir / "bf16.log", (dir / "bf16.out").string()), 0) << read_file((dir / "bf16.log").string());
  EXPECT_EQ(read_file((dir / "bf16.out").string()), lib.generate({"the cat"}, o)[0].text + "\n");
}

TEST(GenerateCli, ClearErrors) {
  const fs::path dir = make_model_dir();
  EXPECT_NE(run_qkv({"generate", "--model", (dir / "nope").string(), "--prompt", "x"}, dir / "e1.log"), 0);
  EXPECT_NE(read_file((dir / "e1.log").string()).find("model directory not found"), std::string::npos)
      << read_file((dir / "e1.log").string());
  const std::string long_prompt(60, 'a');  // 60 tokens; the context is 40
  EXPECT_NE(run_qkv({"generate", "--model", (dir / "model").string(), "--prompt", long_prompt}, dir / "e2.log"), 0);
  const std::string e2 = read_file((dir / "e2.log").string());
  EXPECT_NE(e2.find("prompt 1 has 60 tokens"), std::string::npos) << e2;
  // With --truncate it runs, and warns.
  EXPECT_EQ(run_qkv({"generate", "--model", (dir / "model").string(), "--prompt", long_prompt, "--truncate"},
                    dir / "w.log"), 0) << read_file((dir / "w.log").string());
  EXPECT_NE(read_file((dir / "w.log").string()).find("truncated"), std::string::npos);
  // Samples of several prompts (--num-return 2) name the prompt by its number (its line), once: each
  // prompt stands twice in the batch, and the third was once named by its rows (5, and with
  // --truncate 5 and 6).
  write_file_atomic((dir / "prompts3.txt").string(), "ab\nba\n" + long_prompt + "\n");
  const std::vector<std::string> sampled{"generate", "--model", (dir / "model").string(), "--input",
                                         (dir / "prompts3.txt").string(), "--sample", "--num-return", "2", "-n", "3"};
  EXPECT_EQ(run_qkv(sampled, dir / "e4.log"), 1);
  EXPECT_NE(read_file((dir / "e4.log").string()).find("prompt 3 has 60 tokens"), std::string::npos)
      << read_file((dir / "e4.log").string());
  std::vector<std::string> truncating = sampled;
  truncating.push_back("--truncate");
  EXPECT_EQ(run_qkv(truncating, dir / "w4.log"), 0) << read_file((dir / "w4.log").string());
  const std::string w4 = read_file((dir / "w4.log").string());
  EXPECT_NE(w4.find("warning: prompt 3 (60 tokens) truncated"), std::string::npos) << w4;
  EXPECT_EQ(w4.find("truncated"), w4.rfind("truncated")) << "warned more than once: " << w4;

  // A directory without a tokenizer is named (the message said only "the model directory").
  fs::copy(dir / "model", dir / "bare", fs::copy_options::recursive);
  ASSERT_TRUE(fs::remove(dir / "bare" / "tokenizer.json"));
  EXPECT_NE(run_qkv({"generate", "--model", (dir / "bare").string(), "--prompt", "x"}, dir / "e3.log"), 0);
  EXPECT_NE(read_file((dir / "e3.log").string()).find((dir / "bare").string() + " has no tokenizer"), std::string::npos)
      << read_file((dir / "e3.log").string());

  // Values outside what they can mean are refused by name, not quietly used.
  const std::string model = (dir / "model").string();
  auto expect_refused = [&](const std::vector<std::string>& args, const std::string& want) {
    EXPECT_NE(run_qkv(args, dir / "e.log"), 0) << want;  // 1, or 2 for a usage error
    const std::string log = read_file((dir / "e.log").string());
    EXPECT_NE(log.find(want), std::string::npos) << "expected \"" << want << "\" in " << log;
  };
  expect_refused({"generate", "--model", model, "--prompt", "ab", "--eos-id", "97"},
                 "the end-of-text id must be -1 (none) or a token id in [0, 97), got 97");
  expect_refused({"generate", "--model", model, "--prompt", "ab", "--eos-id", "-7"}, "got -7");
  // -2 is the library's "config.json's id": was taken quietly.
  expect_refused({"generate", "--model", model, "--prompt", "ab", "--eos-id", "-2"},
                 "--eos-id: expected a token id or -1 (none), got -2");
  // A stop of stray bytes matched inside a character and cut it in half.
  expect_refused({"generate", "--model", model, "--prompt", "ab", "--stop", "\xaa"}, "stop string 1 is not valid UTF-8");
  expect_refused({"generate", "--model", model, "--prompt", "a\xff"}, "--prompt: not valid UTF-8");
  expect_refused({"generate", "--model", model, "--prompt", "ab", "--logit-bias", "5:1"},
                 "--logit-bias: expected TOKEN_ID=BIAS (an integer and a number), got '5:1'");
  expect_refused({"generate", "--model", model, "--prompt", "ab", "--logit-bias", "5=x"}, "got '5=x'");
  expect_refused({"generate", "--model", model, "--prompt", "ab", "--logit-bias", "500=1"},
                 "logit_bias: token 500 outside the vocabulary [0, 97)");
  expect_refused({"generate", "--model", model, "--prompt", "ab", "--beams", "2", "--num-return", "3"},
                 "num_return_sequences (3) must not exceed num_beams (2)");
  expect_refused({"generate", "--model", model, "--prompt", "ab", "--num-return", "2"},
                 "greedy decoding has one completion per prompt");
  expect_refused({"generate", "--model", model, "--prompt", "ab", "--beams", "0"},
                 "--beams: must be a positive number, got '0'");
  expect_refused({"generate", "--model", model, "--prompt", "ab", "--sample", "--num-return", "0"},
                 "--num-return: must be a positive number, got '0'");
  expect_refused({"generate", "--model", model, "--prompt", "ab", "--beams", "2", "--stop", "x"},
                 "stop strings are not supported with beam search");
  expect_refused({"generate", "--model", model, "--prompt", "ab", "--length-penalty", "2"}, "--length-penalty requires --beams");
  write_file_atomic((dir / "text.txt").string(), "abc abc abc\n");
  expect_refused({"perplexity", "--model", model, "--input", (dir / "text.txt").string(), "--context", "0"},
                 "--context: must be a positive number, got '0'");
  // Blamed on the flag, not on the input file (it said "text.txt: perplexity: context must be ...").
  expect_refused({"perplexity", "--model", model, "--input", (dir / "text.txt").string(), "--context", "100"},
                 "--context: must be in [2, 40] (the model's n_positions), got 100");
  expect_refused({"perplexity", "--model", model, "--input", (dir / "text.txt").string(), "--context", "8",
                  "--stride", "9"}, "--stride: must be at most the context (8), got 9");
  // A classifier's directory is named as one (it was "field 'qkv_classifier': unknown key").
  fs::copy(dir / "model", dir / "cls", fs::copy_options::recursive);
  nlohmann::json cls = nlohmann::json::parse(read_file((dir / "cls" / "config.json").string()));
  cls["qkv_classifier"] = {{"pairs", false}, {"max_len", 0}};
  write_file_atomic((dir / "cls" / "config.json").string(), cls.dump());
  expect_refused({"generate", "--model", (dir / "cls").string(), "--prompt", "ab"},
                 (dir / "cls").string() + ": is a GPT classifier (config.json has 'qkv_classifier'; apply it with qkv "
                 "classify), not a language model");
  nlohmann::json cfg = nlohmann::json::parse(read_file(model + "/config.json"));
  cfg["eos_token_id"] = 100000;
  write_file_atomic(model + "/config.json", cfg.dump());
  expect_refused({"generate", "--model", model, "--prompt", "ab"},
                 "config.json: field 'eos_token_id': expected a token id in [0, 97) or null, got 100000");
}
