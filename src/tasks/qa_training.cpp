// tasks::train_bert_qa: fine-tuning BERT for extractive QA (qkv/tasks/qa_training.h).
#include "qkv/tasks/qa_training.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <limits>
#include <set>

#include "qkv/data/corpus_qa.h"
#include "qkv/io/bert_qa.h"
#include "qkv/models/model_size.h"
#include "qkv/tasks/bert_pretraining.h"
#include "qkv/tasks/question_answerer.h"
#include "qkv/tensor/rng.h"
#include "qkv/train/optim.h"
#include "qkv/train/qa_task.h"
#include "qkv/util/config.h"

namespace fs = std::filesystem;

namespace qkv::tasks {

std::string ensure_qa_corpus(const std::string& name, const std::string& data_dir) {
  QKV_CHECK(name == "qa-debian", "corpus", "unknown question-answering corpus '", name, "' (expected qa-debian)");
  data::QaCorpusOptions o;
  o.build.data_dir = data_dir;
  o.build.verbose = true;
  return data::build_qa_corpus(o).out_dir;
}

namespace {

// The windows of every training example, targets from its first answer.
std::vector<train::QaFeature> training_features(const std::vector<data::QaExample>& examples,
                                                const text::Tokenizer& tok, const text::QaWindowOptions& wo,
                                                int64_t* with_answer) {
  std::vector<std::vector<train::QaFeature>> per(examples.size());
  std::vector<std::exception_ptr> failed(examples.size());  // an exception must not leave the parallel loop
#pragma omp parallel for schedule(dynamic, 16)
  for (size_t i = 0; i < examples.size(); ++i) {
    try {
      const data::QaExample& e = examples[i];
      const text::TokenSpans ctx = text::tokenize_with_offsets(tok, e.context);
      for (const text::QaWindow& w :
           text::make_qa_windows(tok, e.question, ctx, wo, e.answers[0].byte_begin, e.answers[0].byte_end))
        per[i].push_back(train::qa_feature(w));
    } catch (...) {
      failed[i] = std::current_exception();
    }
  }
  for (auto& f : failed)
    if (f) std::rethrow_exception(f);
  std::vector<train::QaFeature> out;
  *with_answer = 0;
  for (auto& v : per)
    for (auto& f : v) {
      *with_answer += f.start != 0;
      out.push_back(std::move(f));
    }
  return out;
}

}  // namespace

QaRunResult train_bert_qa(const TrainingRun& run) {
  RunDir spec = open_run_dir(run.config_path, run.out_dir, run.resume);
  if (!spec.resuming())
    resolve_data_files(run, spec, {ensure_qa_corpus, "train.jsonl", "valid.jsonl"},
                       "give --corpus qa-debian or both --train and --valid");
  apply_run_flags(spec, run);
  // init_from is this task's own top-level key; the shared reader sees the rest.
  std::string init_from;
  if (spec.config.contains("init_from")) {
    init_from = ConfigReader(spec.config, spec.where).optional_path("init_from");
    spec.config.erase("init_from");
    QKV_CHECK(spec.resuming() || !spec.config.contains("model") || spec.config["model"].empty(), spec.where,
              "give either init_from (a pretrained BERT and its tokenizer) or model + tokenizer, not both");
    if (!spec.config.contains("model")) spec.config["model"] = nlohmann::json::object();
  }
  RunSections sec = read_run_sections(spec.config, spec.where, "bert_qa");
  if (!init_from.empty()) spec.config["init_from"] = init_from;
  QKV_CHECK(init_from.empty() || run.tokenizer_path.empty(), "qkv train",  // (it was silently not used)
            "--tokenizer is not used with init_from: the tokenizer is the pretrained model's");
  QKV_CHECK(sec.model_type == "bert_qa", spec.where, "field 'model_type': train_bert_qa trains \"bert_qa\" models, got \"",
            sec.model_type, "\"");

  ConfigReader dr(sec.data, spec.where, "data");
  QaOptions qa_opt;
  qa_opt.window.max_len = dr.integer_in("max_len", 256, 1, models::kMaxPositions);
  qa_opt.window.doc_stride = dr.integer_in("doc_stride", 128, 1, models::kMaxPositions);
  qa_opt.window.max_query_len = dr.integer_in("max_query_len", 64, 1, models::kMaxPositions);
  const int64_t batch = dr.integer_in("batch_size", 16, 1, models::kMaxBatch);
  dr.finish();
  ConfigReader vr(sec.valid, spec.where, "valid");
  const int64_t valid_max = vr.integer_in("max_examples", 1000, 0, std::numeric_limits<int64_t>::max());
  qa_opt.batch_size = vr.integer_in("batch_size", 32, 1, models::kMaxBatch);
  qa_opt.max_answer_length = vr.integer_in("max_answer_length", 30, 1, models::kMaxPositions);
  vr.finish();
  ConfigReader tr(sec.train, spec.where, "train");
  const train::TrainOptions topt = train::TrainOptions::from_config(tr);
  tr.finish();

  if (!spec.resuming()) {
    if (!spec.config["optimizer"].contains("type")) spec.config["optimizer"]["type"] = "adamw";
    if (!spec.config["optimizer"].contains("lr")) spec.config["optimizer"]["lr"] = 5e-5;  // BERT's fine-tuning rate
    nlohmann::json& sc = spec.config["schedule"];  // BERT's recipe: linear warmup over 10% of the run
    if (!sc.contains("type")) sc["type"] = "warmup_cosine";
    if (sc["type"] != "noam" && !sc.contains("lr")) sc["lr"] = spec.config["optimizer"]["lr"];
    if (sc["type"] == "warmup_cosine" && !sc.contains("warmup"))
      sc["warmup"] = topt.max_steps / 10;  // 0 for a run of under 10 steps (warmup must stay below total)
  }
  check_schedule_early(spec.config, topt, spec.where);  // before the data is read or a tokenizer learned
  check_optimizer_early(spec.config.value("optimizer", nlohmann::json::object()), spec.where);

  const std::vector<data::QaExample> train_set = data::read_qa_file(spec.train, true);
  std::vector<data::QaExample> valid_set = data::read_qa_file(spec.valid, true);
  keep_spread(valid_set, valid_max);

  manual_seed(sec.seed);  // initialisation and dropout draw from the default generator
  io::BertQaBundle bundle;
  if (spec.resuming()) {
    bundle = io::load_bert_qa(spec.checkpoint);
    QKV_CHECK(bundle.tokenizer != nullptr && bundle.report.initialised.empty(), spec.checkpoint,
              "is not a question-answering checkpoint to resume from:\n", bundle.report.summary());
    check_resumed_model(spec, bundle.config);  // a new run records its model, init_from's too
  } else {
    fs::create_directories(spec.dir);
    if (!init_from.empty()) {
      QKV_CHECK(sec.tokenizer.empty(), spec.where, "section 'tokenizer': init_from brings its own tokenizer");
      bundle = io::load_bert_qa(init_from);
      QKV_CHECK(bundle.tokenizer != nullptr, init_from, "has no tokenizer (tokenizer.json or vocab.txt)");
      std::fprintf(stderr, "qkv train: from %s: %s", init_from.c_str(), bundle.report.summary().c_str());
    } else {
      std::vector<std::string> texts;  // each distinct context once, and every question
      std::set<std::string> seen;
      for (auto& e : train_set) {
        if (seen.insert(e.context).second) texts.push_back(e.context);
        texts.push_back(e.question);
      }
      nlohmann::json& m = spec.config["model"];
      const nlohmann::json defaults{{"max_position_embeddings", qa_opt.window.max_len}};
      const models::BertConfig planned = check_model_section<models::BertConfig>(m, defaults, spec.where);
      QKV_CHECK(planned.type_vocab_size >= 2, spec.where,
                "field 'model.type_vocab_size': the question and the context are 2 segment types, got ",
                m["type_vocab_size"].dump());
      check_fits_positions(qa_opt.window.max_len, "data.max_len", planned.max_position_embeddings,
                           "max_position_embeddings", spec.where);  // before the vocabulary is learned
      std::shared_ptr<text::Tokenizer> tok =
          make_bert_tokenizer(sec.tokenizer, spec.where, run.tokenizer_path, texts, (fs::path(spec.dir) / "work").string());
      bundle = io::make_bert_qa(new_model_config<models::BertConfig>(m, defaults, *tok, spec.where));
      bundle.tokenizer = tok;
    }
    spec.config["model"] = bundle.config;
    fix_cosine_schedule(spec.config, topt, spec.where);
    write_run_json(spec);
  }
  check_fits_positions(qa_opt.window.max_len, "data.max_len", bundle.config.max_position_embeddings,
                       "max_position_embeddings", spec.where);
  const text::Tokenizer& tok = *bundle.tokenizer;
  tok.require_special_id(text::Role::Cls), tok.require_special_id(text::Role::Sep);
  const int64_t pad_id = tok.special_id(text::Role::Pad) ? *tok.special_id(text::Role::Pad) : bundle.config.pad_token_id;
  bundle.model->train();

  int64_t with_answer = 0;
  std::vector<train::QaFeature> features = training_features(train_set, tok, qa_opt.window, &with_answer);
  const size_t n_features = features.size();
  train::QaFeatureStream stream(std::move(features), batch, pad_id, sec.seed);
  std::fprintf(stderr, "qkv train: %zu training examples in %zu windows of <= %lld tokens (%lld hold their answer, "
               "the others train to [CLS]), %zu validation examples, vocabulary %d, %lld parameters\n",
               train_set.size(), n_features, (long long)qa_opt.window.max_len, (long long)with_answer,
               valid_set.size(), tok.vocab_size(), (long long)bundle.model->num_parameters());

  auto optimizer = make_optimizer(spec.config.value("optimizer", nlohmann::json::object()), spec.where, *bundle.model);
  auto schedule = schedule_from_config(spec.config, spec.where);
  const QuestionAnswerer answerer(bundle, qa_opt);

  train::TrainCallbacks cb;
  cb.write_model = [&](const std::string& dir) {
    io::save_bert_qa(dir, bundle);
    write_qa_json(dir, qa_opt);
  };
  cb.validate = [&]() {
    const eval::SpanScores s = evaluate_qa(answerer, valid_set);
    std::fprintf(stderr, "\nqkv train: valid EM %.2f  F1 %.2f (%zu questions)\n", s.exact_match, s.f1,
                 valid_set.size());
    return std::map<std::string, double>{{"valid_em", s.exact_match}, {"valid_f1", s.f1}};
  };
  cb.best_metric = "valid_f1";

  train::BertQaTask task(*bundle.model, stream);
  train::Trainer trainer(task, *optimizer, *schedule, topt, spec.dir, cb);
  QaRunResult result;
  result.outcome = resume_and_run(trainer, spec);
  result.steps = trainer.step();
  result.best_f1 = std::max(0.0, trainer.best_score());
  result.model_dir = publish_model(spec.dir, topt.average_last);
  return result;
}

}  // namespace qkv::tasks
