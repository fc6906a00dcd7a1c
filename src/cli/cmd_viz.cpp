// qkv viz --model DIR TEXT: the interactive attention viewer (one self-contained HTML file) for a
// translation, GPT or BERT model, the type read from DIR/config.json.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "cli.h"
#include "qkv/tasks/attention_view.h"
#include "qkv/util/error.h"
#include "qkv/util/utf8.h"

namespace qkv::cli {
namespace {

int run_viz(int argc, char** argv) {
  CLI::App app{"Write an interactive attention viewer (self-contained HTML) for one input", "qkv viz"};
  std::string model_dir, output = "attention.html", target, pair;
  tasks::ViewInput in;
  tasks::ViewOptions opt;
  double max_mb = double(opt.max_bytes) / (1 << 20);
  app.add_option("--model,-m", model_dir, "model directory (translation Transformer or RNN, GPT-2 or BERT)")->required();
  app.add_option("text", in.text, "source sentence (translation), prompt (GPT) or first segment (BERT)")->required();
  app.add_option("--target", target, "translation: the target to show (default: the greedy translation)");
  app.add_option("--pair", pair, "BERT: the second segment");
  app.add_option("--output,-o", output, "the HTML file to write");
  app.add_option("--layers", opt.layers, "layers to include (default: all)");
  app.add_option("--heads", opt.heads, "heads to include (default: all)");
  app.add_option("--max-mb", max_mb, "refuse a page that could be larger than this many MiB")->check(positive());
  QKV_PARSE(app, argc, argv);
  if (app.count("--target")) in.target = target;
  if (app.count("--pair")) in.pair = pair;
  for (const auto& [name, value] :
       {std::pair{"text", in.text}, std::pair{"--target", target}, std::pair{"--pair", pair}})
    QKV_CHECK(qkv::utf8::is_valid(value), "viz", name, ": not valid UTF-8");
  const std::string ext = std::filesystem::path(output).extension().string();
  QKV_CHECK(ext == ".html" || ext == ".htm", output, "--output: viz writes an HTML page; give a .html file name");
  opt.max_bytes = int64_t(max_mb * (1 << 20));
  int64_t bytes = tasks::write_attention_view(model_dir, in, output, opt);
  std::fprintf(stderr, "qkv viz: wrote %s (%lld bytes)\n", output.c_str(), (long long)bytes);
  return 0;
}

Register register_viz("viz", "write an interactive HTML attention viewer (head, model, matrix views) for one input",
                      run_viz);

}  // namespace
}  // namespace qkv::cli
