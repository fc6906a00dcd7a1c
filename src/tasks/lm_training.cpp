// tasks::train_lm: GPT causal-LM pretraining (qkv/tasks/lm_training.h).
#include "qkv/tasks/lm_training.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "qkv/data/corpus_mono.h"
#include "qkv/data/documents.h"
#include "qkv/io/gpt2.h"
#include "qkv/models/model_size.h"
#include "qkv/tasks/training_run.h"
#include "qkv/tensor/rng.h"
#include "qkv/text/bpe_train.h"
#include "qkv/train/lm_task.h"
#include "qkv/train/optim.h"
#include "qkv/train/schedule.h"
#include "qkv/util/config.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace qkv::tasks {
namespace {

// The tokenizer of a new run: loaded from `path` (the flag, or tokenizer.path), or a byte-level
// BPE learned on the training documents with <|endoftext|> as its one special token.
std::shared_ptr<text::Tokenizer> make_tokenizer(const nlohmann::json& section, const std::string& where,
                                                const std::string& flag_path, const std::vector<std::string>& docs,
                                                const std::string& work_dir) {
  ConfigReader r(section, where, "tokenizer");
  if (auto given = given_tokenizer(r, flag_path)) return given;
  const std::string kind = r.string("kind", "bytebpe");
  QKV_CHECK(kind == "bytebpe", r.where("kind"), "a GPT learns a byte-level BPE: expected \"bytebpe\", got \"", kind,
            "\" (or give tokenizer.path)");
  text::BpeTrainOptions o;
  o.byte_level = true;
  o.end_of_word_suffix.clear();
  o.unk_token.clear();
  o.special_tokens = {"<|endoftext|>"};
  o.vocab_size = int(r.integer_in("vocab_size", 8192, 1, int64_t(1) << 24));
  o.min_frequency = r.integer_in("min_frequency", 2, 1, std::numeric_limits<int64_t>::max());
  r.finish();
  fs::create_directories(work_dir);
  std::string text;
  for (const auto& d : docs) text += d + "\n";
  const std::string file = (fs::path(work_dir) / "bpe_input.txt").string();
  write_file_atomic(file, text);
  std::fprintf(stderr, "qkv train: learning a byte-level BPE of %d tokens from %zu documents ...\n", o.vocab_size,
               docs.size());
  std::shared_ptr<text::Tokenizer> tok = text::train_bpe({file}, o);
  std::error_code ec;
  fs::remove(file, ec);
  fs::remove(work_dir, ec);  // only if empty
  return tok;
}

// Each document's ids followed by the end-of-text id (the separator GPT-2 packs with).
std::vector<std::vector<int64_t>> encode_documents(const std::vector<std::string>& docs, const text::Tokenizer& tok,
                                                   int64_t eos) {
  std::vector<std::vector<int64_t>> out(docs.size());
#pragma omp parallel for schedule(dynamic, 64)
  for (size_t i = 0; i < docs.size(); ++i) {
    std::vector<int32_t> ids = tok.encode(docs[i]);
    out[i].assign(ids.begin(), ids.end());
    out[i].push_back(eos);
  }
  return out;
}

size_t count_tokens(const std::vector<std::vector<int64_t>>& docs) {
  size_t n = 0;
  for (const auto& d : docs) n += d.size();
  return n;
}

}  // namespace

LmRunResult train_lm(const LmRun& run) {
  RunDir spec = open_run_dir(run.config_path, run.out_dir, run.resume);
  io::GptBundle bundle;
  if (spec.resuming()) {
    bundle = io::load_gpt2(spec.checkpoint);
    QKV_CHECK(bundle.tokenizer != nullptr, spec.checkpoint, "has no tokenizer.json to resume with");
    bundle.model->train();
  } else {
    resolve_document_files(run, spec);
  }
  apply_run_flags(spec, run);
  RunSections sec = read_run_sections(spec.config, spec.where, "gpt");
  QKV_CHECK(sec.model_type == "gpt", spec.where, "field 'model_type': train_lm trains \"gpt\" models, got \"",
            sec.model_type, "\"");
  if (spec.resuming()) check_resumed_model(spec, bundle.config);

  ConfigReader dr(sec.data, spec.where, "data");
  const int64_t context = dr.integer("context");
  QKV_CHECK(context >= 2 && context <= models::kMaxPositions, dr.where("context"), "expected an integer in [2, ",
            models::kMaxPositions, "], got ", context);
  QKV_CHECK(!(dr.has("batch_size") && dr.has("batch_tokens")), dr.where("batch_tokens"),
            "give batch_size (sequences) or batch_tokens, not both");
  const int64_t batch = dr.has("batch_tokens")
                            ? dr.integer_in("batch_tokens", 0, 0, models::kMaxBatch * context) / context
                            : dr.integer_in("batch_size", 8, 1, models::kMaxBatch);
  dr.finish();
  QKV_CHECK(batch >= 1, dr.where(dr.has("batch_tokens") ? "batch_tokens" : "batch_size"),
            "must give at least one sequence of data.context tokens per batch");

  if (!sec.train.contains("label_smoothing")) sec.train["label_smoothing"] = 0.0;  // plain NLL for a language model
  ConfigReader tr(sec.train, spec.where, "train");
  const train::TrainOptions topt = train::TrainOptions::from_config(tr);
  tr.finish();
  check_schedule_early(spec.config, topt, spec.where);
  check_optimizer_early(sec.optimizer, spec.where);

  ConfigReader vr(sec.valid, spec.where, "valid");
  const int64_t valid_max_tokens =
      vr.integer_in("max_tokens", 0, 0, std::numeric_limits<int64_t>::max());  // 0 = every held-out window
  vr.finish();

  const std::vector<std::string> train_docs = data::read_documents(spec.train);
  const std::vector<std::string> valid_docs = data::read_documents(spec.valid);
  manual_seed(sec.seed);  // initialisation and dropout draw from the default generator
  if (!spec.resuming()) {
    fs::create_directories(spec.dir);
    nlohmann::json& m = spec.config["model"];
    const nlohmann::json defaults{{"n_positions", context}};
    const models::GptConfig planned = check_model_section<models::GptConfig>(m, defaults, spec.where);
    check_fits_positions(context, "data.context", planned.n_positions, "n_positions", spec.where);  // before BPE
    bundle.tokenizer = make_tokenizer(sec.tokenizer, spec.where, run.tokenizer_path, train_docs,
                                      (fs::path(spec.dir) / "work").string());
    bundle.config = new_model_config<models::GptConfig>(m, defaults, *bundle.tokenizer, spec.where);
    fix_cosine_schedule(spec.config, topt, spec.where);
    bundle.model = std::make_shared<models::Gpt>(bundle.config);
    write_run_json(spec);
  }
  check_fits_positions(context, "data.context", bundle.config.n_positions, "n_positions", spec.where);
  const auto eos = bundle.tokenizer->special_id(text::Role::Eos);
  QKV_CHECK(eos.has_value(), spec.where, "the tokenizer has no end-of-text token (<|endoftext|>) to separate documents");

  auto train_ids = encode_documents(train_docs, *bundle.tokenizer, *eos);
  auto valid_ids = encode_documents(valid_docs, *bundle.tokenizer, *eos);
  auto packs = [&](const std::vector<std::vector<int64_t>>& ids, const std::string& file) {
    size_t tokens = 0;
    for (const auto& d : ids) tokens += d.size();
    QKV_CHECK(tokens > size_t(context), file, "holds ", tokens, " tokens: fewer than one window of data.context + 1 = ",
              context + 1);
  };
  packs(train_ids, spec.train);
  packs(valid_ids, spec.valid);
  train::PackedLmStream stream(train_ids, context, batch, sec.seed);
  train::PackedLmStream valid_stream(valid_ids, context, batch, sec.seed);
  // All held-out batches, or k of them spread evenly over the stream (its documents come in file
  // order, grouped by source: the first k batches would score one source only).
  std::vector<train::LmBatch> valid_batches = valid_stream.all_batches();
  if (valid_max_tokens > 0) keep_spread(valid_batches, std::max<int64_t>(1, valid_max_tokens / (batch * context)));
  int64_t valid_tokens = 0;
  for (const train::LmBatch& b : valid_batches) valid_tokens += b.tokens;
  std::fprintf(stderr, "qkv train: %zu training documents (%zu tokens, %lld windows of %lld), %zu validation "
               "documents (%lld tokens scored), %lld parameters\n", train_docs.size(), count_tokens(train_ids),
               (long long)stream.windows(), (long long)context, valid_docs.size(), (long long)valid_tokens,
               (long long)bundle.model->num_parameters());

  auto optimizer = make_optimizer(sec.optimizer, spec.where, *bundle.model);
  auto schedule = schedule_from_config(spec.config, spec.where);

  train::TrainCallbacks cb;
  cb.write_model = [&](const std::string& dir) { io::save_gpt2(dir, bundle); };
  cb.validate = [&]() {
    const double nll = train::LmTask::evaluate_nll(*bundle.model, valid_batches);
    std::fprintf(stderr, "\nqkv train: valid NLL %.4f  perplexity %.2f\n", nll, std::exp(nll));
    return std::map<std::string, double>{{"valid_loss", nll}, {"valid_ppl", std::exp(nll)}};
  };
  cb.best_metric = "valid_ppl";
  cb.lower_is_better = true;

  train::LmTask task(*bundle.model, stream);
  train::Trainer trainer(task, *optimizer, *schedule, topt, spec.dir, cb);
  LmRunResult result;
  result.outcome = resume_and_run(trainer, spec);
  result.steps = trainer.step();
  result.best_perplexity = trainer.best_score();
  result.model_dir = publish_model(spec.dir, topt.average_last);
  return result;
}

}  // namespace qkv::tasks
