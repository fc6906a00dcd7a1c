// qkv train --config CFG.json (--corpus en-de-small | --train T.tsv --valid V.tsv) --out RUN
// qkv train --resume RUN
//
// The run itself is tasks::train_translation (qkv/tasks/translation_training.h), which describes
// the run directory.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli.h"
#include "qkv/tasks/translation_training.h"
#include "train_classifier.h"

namespace qkv::cli {
namespace {

int run(int argc, char** argv) {
  CLI::App app{"Train an encoder-decoder translation model", "qkv train"};
  tasks::TranslationRun r;
  app.add_option("--config,-c", r.config_path, "JSON config (see configs/ and docs/config.md)");
  app.add_option("--corpus", r.corpus, "corpus name built from Debian packages, e.g. en-de-small");
  app.add_option("--train", r.train_tsv, "training pairs, 'source<TAB>target' per line");
  app.add_option("--valid", r.valid_tsv, "validation pairs (same format)");
  app.add_option("--tokenizer", r.tokenizer_path, "use this tokenizer (shared) instead of training BPE");
  app.add_option("--data-dir", r.data_dir, "where corpora are built and cached");
  app.add_option("--out,-o", r.out_dir, "run directory to create");
  app.add_option("--resume", r.resume, "continue the run in this directory from its latest checkpoint");
  app.add_option("--max-steps", r.max_steps, "override train.max_steps");
  app.add_option("--max-minutes", r.max_minutes, "override train.max_minutes (wall-clock budget of this run)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (const int code = train_classifier_if_requested(r); code >= 0) return code;

  const tasks::TranslationRunResult res = tasks::train_translation(r);
  const char* why = res.outcome == train::Outcome::interrupted   ? "interrupted (checkpoint saved)"
                    : res.outcome == train::Outcome::early_stopped ? "early-stopped"
                                                                   : "finished";
  std::fprintf(stderr, "qkv train: %s at step %lld; best validation BLEU %.2f; model in %s\n", why,
               (long long)res.steps, res.best_bleu, res.model_dir.c_str());
  return res.outcome == train::Outcome::interrupted ? 130 : 0;
}

Register reg("train", "train a translation model (Transformer or RNN) on a parallel corpus", run);

}  // namespace
}  // namespace qkv::cli
