// qkv tag --model DIR [--input FILE] [--conll | --json] [--probs] [--precision P]: one sentence per line, words
// separated by spaces -> "word/TAG word/TAG ..." per line, or CoNLL columns (word<TAB>tag, a
// blank line after each sentence), or JSON lines {"words", "tags"[, "probabilities"][, "windows"]}.
// A blank line is answered with nothing (see run). A sentence longer than the model's window is tagged in
// overlapping windows (tasks/tagger.h): every word gets a tag; JSON says "windows": N and stderr names the line.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "qkv/tasks/tag_data.h"
#include "qkv/tasks/tagger.h"

namespace qkv::cli {
namespace {

int run_tag(int argc, char** argv) {
  CLI::App app{"Tag the words of sentences with a fine-tuned BERT token classifier", "qkv tag"};
  std::string model_dir, input;
  bool conll = false, json = false;
  tasks::TagOptions opt;
  app.add_option("--model,-m", model_dir, "token classifier directory (e.g. RUN/model)")->required();
  app.add_option("--input,-i", input, "one sentence per line, words separated by spaces (default: stdin)");
  auto* c = app.add_flag("--conll", conll, "print word<TAB>tag lines, a blank line after each sentence");
  auto* j = app.add_flag("--json", json, "print JSON lines {\"words\", \"tags\", ...}")->excludes(c);
  app.add_flag("--probs", opt.probabilities, "with --json: each tag's probability")->needs(j);
  app.add_option("--batch-size", opt.batch_size, "windows per batch")->check(positive());
  app.add_option("--stride", opt.stride, "pieces between the starts of overlapping windows (default: half a window)")
      ->check(positive());
  std::string precision = "fp32";
  add_precision_option(app, precision);
  QKV_PARSE(app, argc, argv);
  opt.precision = read_precision(precision, "qkv tag");
  const tasks::Tagger tagger(model_dir, opt.precision);  // bf16 / int8: the weights held so as they are read
  std::vector<int64_t> lines;
  std::vector<std::vector<std::string>> sentences;
  if (input.empty()) {
    sentences = tasks::read_word_lines(std::cin, "stdin", &lines);
  } else {
    std::ifstream f = open_input(input, "sentences (words separated by spaces)");
    sentences = tasks::read_word_lines(f, input, &lines);
  }
  // Blank lines are answered with nothing (an empty line, an empty JSON object's lists, an empty
  // CoNLL sentence) so that every answer stands on its input's line; the rest are tagged together.
  std::vector<std::vector<std::string>> words;
  for (const auto& s : sentences)
    if (!s.empty()) words.push_back(s);
  const auto tagged = tagger.tag(words, opt);
  std::vector<tasks::Tagging> res(sentences.size());
  for (size_t i = 0, k = 0; i < sentences.size(); ++i)
    if (!sentences[i].empty()) res[i] = tagged[k++];
  const std::string where = input.empty() ? "stdin" : input;
  for (size_t i = 0; i < res.size(); ++i) {
    const auto& r = res[i];
    if (r.windows > 1)
      std::fprintf(stderr, "qkv tag: %s:%lld: %zu words tagged in %lld overlapping windows\n", where.c_str(),
                   (long long)lines[i], sentences[i].size(), (long long)r.windows);
    if (json) {
      nlohmann::json j{{"words", sentences[i]}, {"tags", r.tags}};
      if (opt.probabilities) j["probabilities"] = r.probability;
      if (r.windows > 1) j["windows"] = r.windows;
      if (r.words_cut) j["words_cut"] = r.words_cut;
      std::printf("%s\n", j.dump().c_str());
    } else if (conll) {
      for (size_t w = 0; w < r.tags.size(); ++w) print_line(sentences[i][w] + "\t" + r.tags[w]);
      print_line("");
    } else {
      std::string line;
      for (size_t w = 0; w < r.tags.size(); ++w) line += (w ? " " : "") + sentences[i][w] + "/" + r.tags[w];
      print_line(line);
    }
  }
  return 0;
}

Register register_tag("tag", "tag the words of sentences with a fine-tuned BERT token classifier (word/TAG)", run_tag);

}  // namespace
}  // namespace qkv::cli
