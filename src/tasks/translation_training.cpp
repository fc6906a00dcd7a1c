// tasks::train_translation: the translation training run (moved from the CLI's `qkv train`).
#include "qkv/tasks/translation_training.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>

#include "qkv/eval/bleu.h"
#include "qkv/eval/chrf.h"
#include "qkv/tasks/training_run.h"
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

// A tokenizer that does not cover the text (e.g. a --tokenizer learned on another language) turns
// it into <unk>s, and the run learns nothing while looking healthy: say so at the start.
void warn_if_mostly_unknown(const std::vector<train::Example>& examples, const text::Tokenizer& src_tok,
                            const text::Tokenizer& tgt_tok) {
  auto share = [&](const text::Tokenizer& tok, bool source) {
    const std::optional<int32_t> unk = tok.special_id(text::Role::Unk);
    if (!unk) return 0.0;
    int64_t n = 0, unknown = 0;
    for (const auto& e : examples)
      for (int64_t id : source ? e.src : e.tgt) n += 1, unknown += id == *unk;
    return n ? double(unknown) / double(n) : 0.0;
  };
  constexpr double kWarnAbove = 0.05;
  for (bool source : {true, false}) {
    const double s = share(source ? src_tok : tgt_tok, source);
    if (s > kWarnAbove)
      std::fprintf(stderr, "qkv train: warning: %.0f%% of the %s training tokens are unknown to the tokenizer "
                   "(does it cover this text?)\n", 100 * s, source ? "source" : "target");
  }
}

}  // namespace

TranslationRunResult train_translation(const TranslationRun& run) {
  RunDir spec = open_run_dir(run.config_path, run.out_dir, run.resume);
  const std::string& out_dir = spec.dir;
  io::Seq2SeqBundle bundle;
  const std::string& checkpoint = spec.checkpoint;
  if (spec.resuming()) {
    bundle = io::load_seq2seq(checkpoint);
    const nlohmann::json none;  // the checkpoint's config.json holds qkv's model_type and model sections
    for (const char* key : {"model_type", "model"})
      check_resumed_field(spec, key, spec.config.contains(key) ? spec.config[key] : none,
                          bundle.config.contains(key) ? bundle.config[key] : none, checkpoint + "/config.json");
    bundle.config = spec.config;
    bundle.model->train();
  } else {
    resolve_data_files(run, spec, {ensure_mt_corpus, "train.tsv", "valid.tsv"},
                       "give --corpus NAME or both --train and --valid");
  }
  apply_run_flags(spec, run);

  const std::string& top_where = spec.where;
  RunSections sec = read_run_sections(spec.config, top_where, "transformer");
  nlohmann::json tok_cfg = sec.tokenizer, data_cfg = sec.data, opt_cfg = sec.optimizer, sched_cfg = sec.schedule,
                 train_cfg = sec.train, valid_cfg = sec.valid;
  const uint64_t seed = sec.seed;

  // Every section is read before anything is written or learned: a misspelt key fails at once,
  // naming the file, not after BPE with a half-made run directory left behind.
  ConfigReader dr(data_cfg, top_where, "data");
  const int64_t max_tokens = dr.integer_in("max_tokens", 4096, 1, std::numeric_limits<int64_t>::max());
  const int64_t max_sentences = dr.integer_in("max_sentences", 256, 1, std::numeric_limits<int64_t>::max());
  // 0: no data.max_len, the model's own (a plain integer: gcc 12 took an optional for uninitialised).
  const int64_t data_max_len = dr.integer_in("max_len", 0, 1, std::numeric_limits<int64_t>::max());
  dr.finish();

  ConfigReader tr(train_cfg, top_where, "train");
  train::TrainOptions topt = train::TrainOptions::from_config(tr);
  tr.finish();

  ConfigReader vr(valid_cfg, top_where, "valid");
  TranslateOptions vreq;
  vreq.search.beam = int(vr.integer_in("beam", 1, 1, 1024));
  vreq.search.alpha = vr.number("alpha", 0.6);
  vreq.search.patience = vr.number("patience", 1.0);
  vreq.search.no_repeat_ngram_size = int(vr.integer_in("no_repeat_ngram_size", 0, 0, 1024));
  vreq.search.allow_unk = vr.boolean("allow_unk", false);
  vreq.search.max_len_ratio = vr.number("max_len_ratio", vreq.search.max_len_ratio);
  vreq.search.max_len_extra = vr.integer_in("max_len_extra", vreq.search.max_len_extra, 0,
                                            std::numeric_limits<int64_t>::max());
  vreq.quiet = true;
  const int64_t valid_sentences = vr.integer_in("max_sentences", 500, 0, std::numeric_limits<int64_t>::max());
  // Decoding's own limits, checked now: at the first validation they ended a run that had trained
  // (and, with the bad value in run.json, every resume of it) with an error naming no field.
  QKV_CHECK(std::isfinite(vreq.search.alpha), vr.where("alpha"), "expected a finite number, got ",
            vreq.search.alpha);
  QKV_CHECK(vreq.search.patience > 0 && vreq.search.patience <= 64, vr.where("patience"),
            "expected a number in (0, 64], got ", vreq.search.patience);
  QKV_CHECK(std::isfinite(vreq.search.max_len_ratio) && vreq.search.max_len_ratio >= 0, vr.where("max_len_ratio"),
            "expected a finite number >= 0, got ", vreq.search.max_len_ratio);
  vr.finish();
  check_optimizer_early(opt_cfg, top_where);  // before run.json: a bad beta left it behind

  if (!sched_cfg.contains("type")) sched_cfg["type"] = "noam";
  const bool noam_takes_width = sched_cfg["type"] == "noam" && !sched_cfg.contains("d_model");
  auto no_width = [&] {
    fail(top_where, "field 'schedule.d_model': the noam schedule (the default) needs d_model and this ",
         spec.config["model_type"].get<std::string>(),
         " model has none; give schedule.d_model or another schedule type");
  };
  if (noam_takes_width && spec.config["model_type"] != "transformer") no_width();  // only a Transformer has d_model
  {  // checked now with a stand-in width; made below, once the tokenizer has completed the model
    nlohmann::json probe = sched_cfg;
    if (noam_takes_width) probe["d_model"] = 1;
    try {
      schedule_from_config(nlohmann::json{{"schedule", probe}}, top_where);
    } catch (const Error& e) {
      if (!noam_takes_width) throw;
      throw Error(std::string(e.what()) + " (d_model 1 stands in for the model's width, not known yet)");
    }
  }

  // tokenizer.protect: the pairs' shared spans behind placeholders, for BPE and training alike;
  // validation BLEU translates the raw sources (the Translator protects and restores them).
  const bool protect = take_protect_flag(tok_cfg, top_where);
  QKV_CHECK(!spec.resuming() || protect == bundle.protect_spans, top_where, "field 'tokenizer.protect' is ",
            protect ? "true" : "false", " but the checkpoint's model was trained with ",
            bundle.protect_spans ? "true" : "false", ": a resumed run keeps it");
  bundle.protect_spans = protect;
  // The tokenizer: given (--tokenizer, or tokenizer.path), else learned as the section says; a new
  // run reads the section now, so that a misspelt key fails before the data is read.
  std::shared_ptr<text::Tokenizer> given_tok;
  std::optional<TokenizerPlan> plan;
  if (!spec.resuming()) {
    ConfigReader tok_reader(tok_cfg, top_where, "tokenizer");
    given_tok = given_tokenizer(tok_reader, run.tokenizer_path, kTokenizerPlanKeys);
    if (!given_tok) plan = read_tokenizer_plan(tok_cfg, top_where);
  }
  const std::string tok_source = !run.tokenizer_path.empty() ? run.tokenizer_path : tok_cfg.value("path", std::string());

  ParallelText train_text = read_parallel_tsv(spec.train), valid_text = read_parallel_tsv(spec.valid);
  const ParallelText valid_raw = valid_text;
  if (protect) {
    protect_pairs(train_text);
    protect_pairs(valid_text);
  }
  manual_seed(seed);  // initialisation and dropout draw from the default generator
  if (!spec.resuming()) {
    fs::create_directories(out_dir);
    if (given_tok) {
      bundle.src_tok = given_tok;
      bundle.tgt_tok = bundle.src_tok;
      try {  // a tokenizer made for another model may lack what translation needs (<pad>, </s>)
        complete_model_config(spec.config, *bundle.src_tok, *bundle.tgt_tok);
      } catch (const Error& e) {
        fail(tok_source, "cannot be a translation model's tokenizer: ", e.what());
      }
    } else {
      std::fprintf(stderr, "qkv train: learning BPE from %zu sentence pairs ...\n", train_text.src.size());
      train_tokenizers(*plan, train_text, (fs::path(out_dir) / "work").string(), bundle.src_tok, bundle.tgt_tok);
      complete_model_config(spec.config, *bundle.src_tok, *bundle.tgt_tok);
    }
    bundle.config = spec.config;
    bundle.model = io::make_seq2seq(spec.config, run.config_path);
    write_run_json(spec);
  }

  const int64_t max_len = data_max_len > 0 ? std::min(data_max_len, bundle.model->max_len()) : bundle.model->max_len();
  train::SeqIds ids = special_ids(bundle);
  int64_t dropped = 0;
  auto examples = encode_pairs(train_text, *bundle.src_tok, *bundle.tgt_tok, ids.eos, max_len, &dropped);
  std::fprintf(stderr, "qkv train: %zu training pairs (%lld longer than %lld tokens dropped), %zu validation pairs, "
               "%lld parameters\n", examples.size(), (long long)dropped, (long long)max_len, valid_text.src.size(),
               (long long)bundle.model->num_parameters());
  warn_if_mostly_unknown(examples, *bundle.src_tok, *bundle.tgt_tok);
  // Each file's stream, with errors that name it and the key that left it empty (the validation
  // file's once blamed "the training corpus" and named neither).
  const std::string len_key = data_max_len > 0 && data_max_len < bundle.model->max_len() ? "data.max_len"
                                                                                          : "model.max_len";
  auto make_stream = [&](std::vector<train::Example> pairs, size_t read, const std::string& file) {
    QKV_CHECK(!pairs.empty(), file, "none of its ", read, " pairs fits: every one has more than ", max_len,
              " tokens on a side (", top_where, ": ", len_key, ")");
    try {
      return std::make_unique<train::Seq2SeqStream>(std::move(pairs), ids, max_tokens, max_sentences, seed);
    } catch (const Error& e) {
      fail(file, e.what(), " (", top_where, ": data.max_tokens)");
    }
  };
  const auto stream = make_stream(std::move(examples), train_text.src.size(), spec.train);
  const auto valid_stream =
      make_stream(encode_pairs(valid_text, *bundle.src_tok, *bundle.tgt_tok, ids.eos, max_len),
                  valid_text.src.size(), spec.valid);
  if (stream->skipped() + valid_stream->skipped() > 0)
    std::fprintf(stderr, "qkv train: %zu training and %zu validation pairs longer than data.max_tokens %lld left out\n",
                 stream->skipped(), valid_stream->skipped(), (long long)max_tokens);

  auto optimizer = make_optimizer(opt_cfg, top_where, *bundle.model);
  if (noam_takes_width) {  // Noam scales by the model's width
    nlohmann::json model_cfg = io::resolved_model_config(spec.config, top_where);
    if (!model_cfg.contains("d_model")) no_width();
    sched_cfg["d_model"] = model_cfg["d_model"];
  }
  auto schedule = schedule_from_config(nlohmann::json{{"schedule", sched_cfg}}, top_where);
  std::vector<std::string> vsrc = valid_raw.src;  // BLEU's sentences: valid.max_sentences, spread
  std::vector<std::vector<std::string>> vref(1, valid_raw.tgt);
  keep_spread(vsrc, valid_sentences);
  keep_spread(vref[0], valid_sentences);
  auto valid_batches = valid_stream->all_batches();
  const Translator validator(bundle);  // the model being trained: shared, not copied

  train::TrainCallbacks cb;
  cb.write_model = [&](const std::string& dir) { io::save_seq2seq(dir, bundle); };
  cb.validate = [&]() {
    std::map<std::string, double> m;
    m["valid_loss"] = train::Seq2SeqTask::evaluate_loss(*bundle.model, valid_batches, ids.pad);
    std::vector<std::string> hyp;
    {
      const nn::EvalScope eval_mode(*bundle.model);
      hyp = validator.translate(vsrc, vreq).text;
    }
    m["valid_bleu"] = eval::corpus_bleu(hyp, vref).score;
    m["valid_chrf"] = eval::corpus_chrf(hyp, vref).score;
    std::fprintf(stderr, "\nqkv train: valid loss %.4f  BLEU %.2f  chrF %.2f\n", m["valid_loss"], m["valid_bleu"],
                 m["valid_chrf"]);
    return m;
  };

  train::Seq2SeqTask task(*bundle.model, *stream, ids.pad);
  train::Trainer trainer(task, *optimizer, *schedule, topt, out_dir, cb);
  if (!checkpoint.empty()) {
    trainer.restore_training_state(checkpoint);
    std::fprintf(stderr, "qkv train: resumed from %s at step %lld\n", checkpoint.c_str(), (long long)trainer.step());
  }
  train::Outcome outcome = trainer.run();

  const std::string model_dir = publish_model(out_dir, topt.average_last);
  TranslationRunResult result;
  result.outcome = outcome;
  result.steps = trainer.step();
  result.best_bleu = trainer.best_bleu();
  result.model_dir = model_dir;
  return result;
}

}  // namespace qkv::tasks
