// tasks::train_translation: the translation training run (moved from the CLI's `qkv train`).
#include "qkv/tasks/translation_training.h"

#include <cstdio>
#include <filesystem>

#include "qkv/eval/bleu.h"
#include "qkv/eval/chrf.h"
#include "qkv/tasks/translator.h"
#include "qkv/tensor/rng.h"
#include "qkv/train/checkpoint.h"
#include "qkv/train/optim.h"
#include "qkv/train/schedule.h"
#include "qkv/train/seq2seq_task.h"
#include "qkv/util/config.h"
#include "qkv/util/file.h"
#include "translation_setup.h"

namespace fs = std::filesystem;

namespace qkv::tasks {
namespace {

struct RunSpec {
  nlohmann::json config;  // resolved: model vocab sizes and special ids filled in
  std::string train_tsv, valid_tsv;
};

nlohmann::json read_json(const std::string& path) {
  try {
    return nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail(path, "not valid JSON: ", e.what());
  }
}

}  // namespace

TranslationRunResult train_translation(const TranslationRun& run) {
  std::string out_dir = run.out_dir;
  RunSpec spec;
  io::Seq2SeqBundle bundle;
  std::string checkpoint;
  if (!run.resume.empty()) {
    out_dir = run.resume;
    std::string run_json = (fs::path(run.resume) / "run.json").string();
    QKV_CHECK(fs::exists(run_json), run.resume, "not a run directory (no run.json); start a run with --config");
    nlohmann::json rj = read_json(run_json);
    spec.config = rj.at("config");
    spec.train_tsv = rj.at("train").get<std::string>();
    spec.valid_tsv = rj.at("valid").get<std::string>();
    auto latest = train::CheckpointManager::latest(run.resume);
    QKV_CHECK(latest.has_value(), run.resume, "no checkpoint to resume from under checkpoints/");
    checkpoint = *latest;
    bundle = io::load_seq2seq(checkpoint);
    bundle.config = spec.config;
    bundle.model->train();
  } else {
    QKV_CHECK(!run.config_path.empty(), "train", "give --config (or --resume RUN)");
    QKV_CHECK(!out_dir.empty(), "train", "give --out RUN_DIR");
    QKV_CHECK(!fs::exists(fs::path(out_dir) / "run.json"), out_dir,
              "already holds a run; use --resume to continue it or choose another --out");
    spec.config = read_json(run.config_path);
    if (!run.corpus.empty()) {
      std::string dir = ensure_mt_corpus(run.corpus, run.data_dir);
      spec.train_tsv = (fs::path(dir) / "train.tsv").string();
      spec.valid_tsv = (fs::path(dir) / "valid.tsv").string();
    }
    if (!run.train_tsv.empty()) spec.train_tsv = run.train_tsv;
    if (!run.valid_tsv.empty()) spec.valid_tsv = run.valid_tsv;
    QKV_CHECK(!spec.train_tsv.empty() && !spec.valid_tsv.empty(), "train",
              "give --corpus NAME or both --train and --valid");
    spec.train_tsv = fs::absolute(spec.train_tsv).string();
    spec.valid_tsv = fs::absolute(spec.valid_tsv).string();
  }
  if (run.max_steps >= 0) spec.config["train"]["max_steps"] = run.max_steps;
  if (run.max_minutes >= 0) spec.config["train"]["max_minutes"] = run.max_minutes;

  // Validate the top-level keys (each section is read strictly where it is used).
  const std::string top_where = run.config_path.empty() ? out_dir + "/run.json" : run.config_path;
  ConfigReader top(spec.config, top_where);
  std::string model_type = top.string("model_type", "transformer");
  top.object("model");
  nlohmann::json tok_cfg = top.object("tokenizer", false), data_cfg = top.object("data", false),
                 opt_cfg = top.object("optimizer", false), sched_cfg = top.object("schedule", false),
                 train_cfg = top.object("train", false), valid_cfg = top.object("valid", false);
  uint64_t seed = uint64_t(top.integer("seed", 1));
  top.finish();
  spec.config["model_type"] = model_type;

  ParallelText train_text = read_parallel_tsv(spec.train_tsv), valid_text = read_parallel_tsv(spec.valid_tsv);
  manual_seed(seed);  // initialisation and dropout draw from the default generator
  if (run.resume.empty()) {
    fs::create_directories(out_dir);
    if (!run.tokenizer_path.empty()) {
      bundle.src_tok = text::load_tokenizer(run.tokenizer_path);
      bundle.tgt_tok = bundle.src_tok;
    } else {
      std::fprintf(stderr, "qkv train: learning BPE from %zu sentence pairs ...\n", train_text.src.size());
      train_tokenizers(tok_cfg, train_text, (fs::path(out_dir) / "work").string(), bundle.src_tok, bundle.tgt_tok);
    }
    complete_model_config(spec.config, *bundle.src_tok, *bundle.tgt_tok);
    bundle.config = spec.config;
    bundle.model = io::make_seq2seq(spec.config, run.config_path);
    write_file_atomic((fs::path(out_dir) / "run.json").string(),
                      nlohmann::json{{"config", spec.config}, {"train", spec.train_tsv}, {"valid", spec.valid_tsv}}
                              .dump(2) + "\n");
  }

  ConfigReader dr(data_cfg, "config", "data");
  int64_t max_tokens = dr.integer("max_tokens", 4096), max_sentences = dr.integer("max_sentences", 256);
  int64_t max_len = std::min<int64_t>(dr.integer("max_len", bundle.model->max_len()), bundle.model->max_len());
  dr.finish();
  train::SeqIds ids = special_ids(bundle);
  int64_t dropped = 0;
  auto examples = encode_pairs(train_text, *bundle.src_tok, *bundle.tgt_tok, ids.eos, max_len, &dropped);
  std::fprintf(stderr, "qkv train: %zu training pairs (%lld longer than %lld tokens dropped), %zu validation pairs, "
               "%lld parameters\n", examples.size(), (long long)dropped, (long long)max_len, valid_text.src.size(),
               (long long)bundle.model->num_parameters());
  train::Seq2SeqStream stream(std::move(examples), ids, max_tokens, max_sentences, seed);
  train::Seq2SeqStream valid_stream(encode_pairs(valid_text, *bundle.src_tok, *bundle.tgt_tok, ids.eos, max_len),
                                    ids, max_tokens, max_sentences, seed);
  if (stream.skipped() + valid_stream.skipped() > 0)
    std::fprintf(stderr, "qkv train: %zu training and %zu validation pairs longer than data.max_tokens %lld left out\n",
                 stream.skipped(), valid_stream.skipped(), (long long)max_tokens);

  auto optimizer = make_optimizer(opt_cfg, "config", *bundle.model);
  if (!sched_cfg.contains("type")) sched_cfg["type"] = "noam";
  if (sched_cfg["type"] == "noam" && !sched_cfg.contains("d_model")) {  // Noam scales by the model's width
    nlohmann::json model_cfg = io::resolved_model_config(spec.config, top_where);
    QKV_CHECK(model_cfg.contains("d_model"), top_where, "field 'schedule.d_model': the noam schedule (the default) ",
              "needs d_model and this ", spec.config["model_type"].get<std::string>(),
              " model has none; give schedule.d_model or another schedule type");
    sched_cfg["d_model"] = model_cfg["d_model"];
  }
  auto schedule = make_schedule(sched_cfg);

  ConfigReader tr(train_cfg, "config", "train");
  train::TrainOptions topt = train::TrainOptions::from_config(tr);
  tr.finish();

  ConfigReader vr(valid_cfg, "config", "valid");
  TranslateOptions vreq;
  vreq.search.beam = int(vr.integer("beam", 1));
  vreq.search.alpha = vr.number("alpha", 0.6);
  vreq.search.no_repeat_ngram_size = int(vr.integer("no_repeat_ngram_size", 0));
  vreq.search.max_len_ratio = vr.number("max_len_ratio", vreq.search.max_len_ratio);
  vreq.search.max_len_extra = vr.integer("max_len_extra", vreq.search.max_len_extra);
  vreq.quiet = true;
  int64_t valid_sentences = vr.integer("max_sentences", 500);
  vr.finish();
  std::vector<std::string> vsrc(valid_text.src.begin(),
                                valid_text.src.begin() + std::min<int64_t>(valid_sentences, int64_t(valid_text.src.size())));
  std::vector<std::vector<std::string>> vref(1, std::vector<std::string>(valid_text.tgt.begin(),
                                                                       valid_text.tgt.begin() + int64_t(vsrc.size())));
  auto valid_batches = valid_stream.all_batches();
  const Translator validator(bundle);  // the model being trained: shared, not copied

  train::TrainCallbacks cb;
  cb.write_model = [&](const std::string& dir) { io::save_seq2seq(dir, bundle); };
  cb.validate = [&]() {
    std::map<std::string, double> m;
    m["valid_loss"] = train::Seq2SeqTask::evaluate_loss(*bundle.model, valid_batches, ids.pad);
    bool was = bundle.model->is_training();
    bundle.model->eval();
    auto hyp = validator.translate(vsrc, vreq).text;
    bundle.model->train(was);
    m["valid_bleu"] = eval::corpus_bleu(hyp, vref).score;
    m["valid_chrf"] = eval::corpus_chrf(hyp, vref).score;
    std::fprintf(stderr, "\nqkv train: valid loss %.4f  BLEU %.2f  chrF %.2f\n", m["valid_loss"], m["valid_bleu"],
                 m["valid_chrf"]);
    return m;
  };

  train::Seq2SeqTask task(*bundle.model, stream, ids.pad);
  train::Trainer trainer(task, *optimizer, *schedule, topt, out_dir, cb);
  if (!checkpoint.empty()) {
    trainer.restore_training_state(checkpoint);
    std::fprintf(stderr, "qkv train: resumed from %s at step %lld\n", checkpoint.c_str(), (long long)trainer.step());
  }
  train::Outcome outcome = trainer.run();

  auto best = train::CheckpointManager::best(out_dir);
  std::string publish = best ? *best : *train::CheckpointManager::latest(out_dir);
  train::copy_directory_atomic(publish, (fs::path(out_dir) / "model").string());
  fs::remove((fs::path(out_dir) / "model" / "training_state.safetensors"));
  TranslationRunResult result;
  result.outcome = outcome;
  result.steps = trainer.step();
  result.best_bleu = trainer.best_bleu();
  result.model_dir = (fs::path(out_dir) / "model").string();
  return result;
}

}  // namespace qkv::tasks
