// `qkv average --out DIR CKPT...` (or `--run RUN --last N`): the parameters of several checkpoints
// of one model averaged into a new model directory (train::average_checkpoints).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "cli.h"
#include "qkv/train/checkpoint.h"
#include "qkv/util/error.h"

namespace {

namespace fs = std::filesystem;

// --out is replaced as a whole, so it must not hold anything of the user's: it may be new or an
// empty directory; an existing one only with --force, and never one of the checkpoints read.
void check_out_dir(const std::string& out, const std::vector<std::string>& dirs, bool force) {
  std::error_code ec;
  qkv::train::directory_target(out, "--out");  // "." or "..": refused before any checkpoint is read
  if (!fs::exists(out, ec)) return;
  QKV_CHECK(fs::is_directory(out, ec), out, "--out: expected a directory to create, found a file");
  // Replacing --out deletes everything under it: a checkpoint read may not be there (`--out RUN
  // --force` over RUN/checkpoints/step-N deleted the run, the checkpoint read included).
  const fs::path o = fs::weakly_canonical(out, ec);
  for (const auto& d : dirs) {
    const fs::path c = fs::weakly_canonical(d, ec);
    const auto [end, _] = std::mismatch(o.begin(), o.end(), c.begin(), c.end());
    QKV_CHECK(end != o.end(), out, "--out ", fs::equivalent(out, d, ec) ? "is" : "holds",
              " one of the checkpoints being averaged (", d, "); give a new directory");
  }
  if (force || fs::is_empty(out, ec)) return;
  std::string first;
  for (const auto& e : fs::directory_iterator(out, ec)) {
    first = e.path().filename().string();
    break;
  }
  qkv::fail(out, "--out exists and is not empty (it holds '", first,
            "'); give a new directory, or --force to replace it and everything in it");
}

int run_average(int argc, char** argv) {
  CLI::App app{"Average the parameters of checkpoints of one model into a new model directory", "qkv average"};
  std::vector<std::string> dirs;
  std::string out, run_dir;
  int last = 0;
  bool force = false;
  app.add_option("checkpoints", dirs, "checkpoint or model directories (config.json + model.safetensors)");
  app.add_option("--run", run_dir, "a run directory: average its newest checkpoints (with --last)");
  app.add_option("--last", last, "how many of the run's newest checkpoints")->check(qkv::cli::positive());
  app.add_option("--out", out, "the averaged model directory (written atomically; new or empty, unless --force)")
      ->required();
  app.add_flag("--force", force, "replace --out if it exists: everything in it is deleted");
  QKV_PARSE(app, argc, argv);
  if (!run_dir.empty()) {
    QKV_CHECK(dirs.empty(), "average", "give checkpoint directories or --run, not both");
    QKV_CHECK(last > 0, "average", "--run needs --last N");
    dirs = qkv::train::last_checkpoints(run_dir, last);
  }
  QKV_CHECK(!dirs.empty(), "average", "give checkpoint directories, or --run RUN --last N");
  check_out_dir(out, dirs, force);
  qkv::train::average_checkpoints(dirs, out);
  std::fprintf(stderr, "qkv average: %zu checkpoints -> %s\n", dirs.size(), out.c_str());
  for (const auto& d : dirs) std::fprintf(stderr, "  %s\n", d.c_str());
  return 0;
}

qkv::cli::Register register_average("average",
                                    "average the parameters of checkpoints (Vaswani et al.'s last-5 average)",
                                    run_average);

}  // namespace
