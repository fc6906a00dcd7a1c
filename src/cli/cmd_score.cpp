// qkv score --model DIR: how likely a translation model finds given translations (forced decoding,
// as Marian's scorer and fairseq's --score-reference): one line per pair, the sum of the target
// tokens' natural-log probabilities (</s> included), or their mean with --normalize; --word-scores
// adds each token's; --summary prints the tokens, mean NLL and perplexity of all pairs to stderr.
// Pairs come as source<TAB>target lines (--input, or stdin), or as two line-aligned files.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <string>

#include "cli.h"
#include "qkv/tasks/translator.h"

namespace qkv::cli {
namespace {

// %.17g: every bit of a double, so that scripts comparing scores see what qkv computed.
std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

int run_score(int argc, char** argv) {
  CLI::App app{"Score translations with a trained encoder-decoder model (forced decoding)", "qkv score"};
  std::string model_dir, input, src_file, tgt_file, on_long = "truncate", precision = "fp32";
  tasks::ScoreOptions opt;
  bool normalize = false, summary = false;
  app.add_option("--model,-m", model_dir, "model directory (config.json, model.safetensors, tokenizer)")->required();
  auto* in = app.add_option("--input,-i", input, "source<TAB>target lines (default: stdin)");
  auto* src = app.add_option("--src", src_file, "sources, one per line (with --tgt, instead of --input)");
  auto* tgt = app.add_option("--tgt", tgt_file, "targets, line-aligned with --src");
  src->needs(tgt)->excludes(in);
  tgt->needs(src)->excludes(in);
  app.add_flag("--normalize", normalize, "print the mean log-probability per target token instead of the sum");
  app.add_flag("--word-scores", opt.token_logprobs, "after the score, each target token's log-probability");
  app.add_flag("--summary", summary, "to stderr: target tokens, mean negative log-likelihood and perplexity");
  app.add_option("--batch-size", opt.batch_size, "pairs per batch")->check(positive());
  app.add_option("--on-long", on_long, "a side longer than the model allows: truncate (warn) or refuse")
      ->check(CLI::IsMember({"truncate", "refuse"}));
  add_precision_option(app, precision);
  QKV_PARSE(app, argc, argv);
  opt.precision = read_precision(precision, "qkv score");
  opt.refuse_long = on_long == "refuse";

  std::vector<std::string> sources, targets;
  if (!src_file.empty()) {
    sources = read_input_lines(src_file, "source sentences");
    targets = read_input_lines(tgt_file, "target sentences");
    QKV_CHECK(sources.size() == targets.size(), tgt_file, "has ", targets.size(), " lines but ", src_file, " has ",
              sources.size(), " (expected line-aligned files)");
  } else {
    const std::string where = input.empty() ? "stdin" : input;
    for (const std::string& line : read_input_lines(input, "source<TAB>target pairs")) {
      const size_t tab = line.find('\t');
      QKV_CHECK(tab != std::string::npos && line.find('\t', tab + 1) == std::string::npos, where, "line ",
                sources.size() + 1, ": expected source<TAB>target (one tab), got ",
                tab == std::string::npos ? "no tab" : "more than one");
      sources.push_back(line.substr(0, tab));
      targets.push_back(line.substr(tab + 1));
    }
  }
  tasks::Translator translator(model_dir, opt.precision);
  const tasks::Scores r = translator.score(sources, targets, opt);
  double total = 0;
  int64_t tokens = 0;
  for (const tasks::PairScore& s : r.pairs) {
    std::string line = number(normalize ? s.logprob / double(s.tokens) : s.logprob);
    for (double lp : s.token_logprobs) line += " " + number(lp);
    print_line(line);
    total += s.logprob;
    tokens += s.tokens;
  }
  std::fflush(stdout);
  if (summary)
    std::fprintf(stderr, "qkv score: %zu pairs, %lld target tokens, mean NLL %.6f nats/token, perplexity %.4f\n",
                 r.pairs.size(), (long long)tokens, -total / double(tokens), std::exp(-total / double(tokens)));
  return 0;
}

Register register_score("score", "score translations with a trained model (forced decoding: log-probabilities)",
                        run_score);

}  // namespace
}  // namespace qkv::cli
