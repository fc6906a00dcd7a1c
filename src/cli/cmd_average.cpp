// `qkv average --out DIR CKPT...` (or `--run RUN --last N`): the parameters of several checkpoints
// of one model averaged into a new model directory (train::average_checkpoints).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"
#include "qkv/train/checkpoint.h"
#include "qkv/util/error.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{"Average the parameters of checkpoints of one model into a new model directory", "qkv average"};
  std::vector<std::string> dirs;
  std::string out, run_dir;
  int last = 0;
  app.add_option("checkpoints", dirs, "checkpoint or model directories (config.json + model.safetensors)");
  app.add_option("--run", run_dir, "a run directory: average its newest checkpoints (with --last)");
  app.add_option("--last", last, "how many of the run's newest checkpoints")->check(CLI::PositiveNumber);
  app.add_option("--out", out, "the averaged model directory (written atomically)")->required();
  CLI11_PARSE(app, argc, argv);
  if (!run_dir.empty()) {
    QKV_CHECK(dirs.empty(), "average", "give checkpoint directories or --run, not both");
    QKV_CHECK(last > 0, "average", "--run needs --last N");
    dirs = qkv::train::last_checkpoints(run_dir, last);
  }
  QKV_CHECK(!dirs.empty(), "average", "give checkpoint directories, or --run RUN --last N");
  qkv::train::average_checkpoints(dirs, out);
  std::fprintf(stderr, "qkv average: %zu checkpoints -> %s\n", dirs.size(), out.c_str());
  for (const auto& d : dirs) std::fprintf(stderr, "  %s\n", d.c_str());
  return 0;
}

qkv::cli::Register reg("average", "average the parameters of checkpoints (Vaswani et al.'s last-5 average)", run);

}  // namespace
