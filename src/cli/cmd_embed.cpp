// qkv embed --model DIR [--pooling cls|mean] [--normalize] [--input FILE] [--batch-size N]: one
// input per line (a text, or a<TAB>b for a pair; the first line decides) -> one JSON array of
// floats per line, each float at full precision (9 significant digits: it reads back to the same
// float). What loading the checkpoint loaded, initialised and ignored goes to stderr, and so does
// a warning naming each input cut to max_position_embeddings.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "cli.h"
#include "qkv/tasks/embedder.h"

namespace qkv::cli {
namespace {

// [v0,v1,...] with %.9g (std::numeric_limits<float>::max_digits10): valid JSON for finite values.
std::string json_array(const std::vector<float>& v) {
  std::string s = "[";
  char buf[32];
  for (size_t i = 0; i < v.size(); ++i) {
    QKV_CHECK(std::isfinite(v[i]), "qkv embed", "component ", i, " of an embedding is not finite (", v[i], ")");
    std::snprintf(buf, sizeof buf, "%s%.9g", i ? "," : "", double(v[i]));
    s += buf;
  }
  return s + "]";
}

int run_embed(int argc, char** argv) {
  CLI::App app{"Sentence embeddings from a BERT model: one JSON array of floats per input line", "qkv embed"};
  std::string model_dir, input, pooling = "cls";
  tasks::EmbedOptions opt;
  app.add_option("--model,-m", model_dir, "BERT directory (config.json, model.safetensors, vocab.txt or tokenizer.json)")
      ->required();
  app.add_option("--pooling", pooling, "cls: the last hidden state at [CLS]; mean: the average over the real tokens")
      ->check(CLI::IsMember({"cls", "mean"}));
  app.add_flag("--normalize", opt.normalize, "divide each vector by its L2 norm");
  app.add_option("--input,-i", input, "one input per line: text, or a<TAB>b for pairs (default: stdin)");
  app.add_option("--batch-size", opt.batch_size, "inputs per batch")->check(positive());
  std::string precision = "fp32";
  add_precision_option(app, precision);
  QKV_PARSE(app, argc, argv);
  opt.precision = read_precision(precision, "qkv embed");
  opt.pooling = tasks::parse_pooling(pooling);
  tasks::Embedder emb(model_dir, opt.precision);  // bf16: the weights held in bf16 as they are read
  std::fprintf(stderr, "%s: %s", model_dir.c_str(), emb.bundle().report.summary().c_str());
  std::vector<tasks::ClsInput> inputs;
  std::vector<int64_t> lines;  // of each input in the file
  const std::string where = input.empty() ? "stdin" : input;
  if (input.empty()) {
    inputs = tasks::read_cls_inputs(std::cin, where, -1, &lines);
  } else {
    std::ifstream f = open_input(input, "texts or a<TAB>b pairs");
    inputs = tasks::read_cls_inputs(f, where, -1, &lines);
  }
  const auto out = emb.embed(inputs, opt);
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].truncated)
      warn_truncated("qkv embed", where, lines[i], emb.bundle().config.max_position_embeddings,
                     "max_position_embeddings");
    std::printf("%s\n", json_array(out[i].vector).c_str());
  }
  return 0;
}

Register register_embed("embed", "sentence embeddings from a BERT model ([CLS] or mean pooling), JSON lines",
                        run_embed);

}  // namespace
}  // namespace qkv::cli
