// qkv classify --model DIR [--input FILE] [--json] [--all-probs]: one input per line (a text, or
// a<TAB>b for a pair model) -> "label<TAB>probability" per line, or JSON lines
// {"label", "probability"[, "probabilities"][, "truncated"]}. An empty line is the empty text. An
// input cut to the model's max_len is named on stderr.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "qkv/tasks/classifier.h"

namespace qkv::cli {
namespace {

int run_classify(int argc, char** argv) {
  CLI::App app{"Classify texts (or pairs of texts) with a fine-tuned classifier", "qkv classify"};
  std::string model_dir, input;
  bool json = false;
  tasks::ClassifyOptions opt;
  app.add_option("--model,-m", model_dir, "classifier directory (e.g. RUN/model)")->required();
  app.add_option("--input,-i", input, "one input per line: text, or a<TAB>b for a pair model (default: stdin)");
  auto* json_flag = app.add_flag("--json", json, "print JSON lines instead of label<TAB>probability");
  app.add_flag("--all-probs", opt.all_probabilities, "with --json: every label's probability")->needs(json_flag);
  app.add_option("--batch-size", opt.batch_size, "inputs per batch")->check(positive());
  std::string precision = "fp32";
  add_precision_option(app, precision);
  QKV_PARSE(app, argc, argv);
  opt.precision = read_precision(precision, "qkv classify");
  tasks::Classifier clf(model_dir, opt.precision);  // bf16: the weights held in bf16 as they are read
  std::vector<tasks::ClsInput> inputs;
  std::vector<int64_t> lines;  // of each input in the file
  const std::string where = input.empty() ? "stdin" : input;
  if (input.empty()) {
    inputs = tasks::read_cls_inputs(std::cin, where, clf.input_pairs(), &lines);
  } else {
    std::ifstream f = open_input(input, clf.pairs() ? "a<TAB>b pairs" : "texts");
    inputs = tasks::read_cls_inputs(f, where, clf.input_pairs(), &lines);
  }
  const auto res = clf.classify(inputs, opt);
  for (size_t i = 0; i < res.size(); ++i) {
    const auto& r = res[i];
    if (r.truncated) warn_truncated("qkv classify", where, lines[i], clf.max_len(), "the model's max_len");
    if (json) {
      nlohmann::json j{{"label", r.label}, {"probability", r.probability}};
      if (opt.all_probabilities) {
        nlohmann::json p = nlohmann::json::object();
        for (size_t c = 0; c < r.probabilities.size(); ++c) p[clf.labels()[c]] = r.probabilities[c];
        j["probabilities"] = p;
      }
      if (r.truncated) j["truncated"] = true;
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("%s\t%.6f\n", r.label.c_str(), r.probability);
    }
  }
  return 0;
}

Register register_classify("classify",
                           "classify texts or text pairs with a fine-tuned classifier (label<TAB>probability)",
                           run_classify);

}  // namespace
}  // namespace qkv::cli
