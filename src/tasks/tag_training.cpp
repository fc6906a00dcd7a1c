// tasks::train_bert_tagger: BERT token classification (qkv/tasks/tag_training.h).
#include "qkv/tasks/tag_training.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>

#include "qkv/data/corpus_tagged.h"
#include "qkv/io/bert_tagger.h"
#include "qkv/models/model_size.h"
#include "qkv/tasks/bert_pretraining.h"
#include "qkv/tasks/tag_data.h"
#include "qkv/tasks/tagger.h"
#include "qkv/tensor/rng.h"
#include "qkv/train/optim.h"
#include "qkv/train/schedule.h"
#include "qkv/train/tag_task.h"
#include "qkv/util/config.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace qkv::tasks {

std::string ensure_tag_corpus(const std::string& name, const std::string& data_dir) {
  data::ExtraBuildOptions o;
  o.data_dir = data_dir;
  o.verbose = true;
  if (name == "pos-wsj") return data::build_pos_wsj_corpus(o).out_dir;
  if (name == "ner-debian") return data::build_ner_debian_corpus(o).out_dir;
  fail("corpus", "unknown tagging corpus '", name, "' (expected pos-wsj or ner-debian)");
}

namespace {

// Tag names -> ids; a tag the model does not know is an error naming the file and line.
std::vector<std::vector<int64_t>> label_ids(const std::vector<TaggedSentence>& set, const std::vector<std::string>& names,
                                            const std::string& path) {
  std::map<std::string, int64_t> id;
  for (size_t i = 0; i < names.size(); ++i) id[names[i]] = int64_t(i);
  std::vector<std::vector<int64_t>> out(set.size());
  for (size_t s = 0; s < set.size(); ++s)
    for (size_t w = 0; w < set[s].tags.size(); ++w) {
      auto it = id.find(set[s].tags[w]);
      QKV_CHECK(it != id.end(), path + ":" + std::to_string(set[s].line + int64_t(w)), "field 'tag': '",
                set[s].tags[w], "' is not a label of the model (the training set's tags)");
      out[s].push_back(it->second);
    }
  return out;
}

std::vector<std::string> sentence_texts(const std::vector<TaggedSentence>& set) {
  std::vector<std::string> out;
  out.reserve(set.size());
  for (const auto& s : set) {
    std::string t;
    for (const auto& w : s.words) t += (t.empty() ? "" : " ") + w;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

TaggerRunResult train_bert_tagger(const TrainingRun& run) {
  RunDir spec = open_run_dir(run.config_path, run.out_dir, run.resume);
  if (!spec.resuming())
    resolve_data_files(run, spec, {ensure_tag_corpus, "train.conll", "valid.conll"},
                       "give --corpus pos-wsj|ner-debian or both --train and --valid (word<TAB>tag files)");
  apply_run_flags(spec, run);
  ConfigReader top(spec.config, spec.where);
  const std::string model_type = top.string("model_type");
  QKV_CHECK(model_type == "bert_tagger", top.where("model_type"), "expected \"bert_tagger\", got \"", model_type, "\"");
  const std::string init_from = top.optional_path("init_from");
  nlohmann::json model_cfg = top.object("model", false), tok_cfg = top.object("tokenizer", false),
                 data_cfg = top.object("data", false), opt_cfg = top.object("optimizer", false),
                 train_cfg = top.object("train", false), valid_cfg = top.object("valid", false);
  top.object("schedule", false);
  const uint64_t seed = uint64_t(top.integer("seed", 1));
  top.finish();
  QKV_CHECK(init_from.empty() || (model_cfg.empty() && tok_cfg.empty()), spec.where,
            "give either init_from (a BERT directory and its tokenizer) or model + tokenizer, not both");
  QKV_CHECK(init_from.empty() || run.tokenizer_path.empty(), "qkv train",
            "--tokenizer is not used with init_from: the tokenizer is the pretrained model's");

  ConfigReader dr(data_cfg, spec.where, "data");
  int64_t max_len = dr.integer_in("max_len", 128, 3, models::kMaxPositions);  // 3: [CLS] word [SEP]
  const int64_t batch = dr.integer_in("batch_size", 32, 1, models::kMaxBatch);
  dr.finish();
  if (!train_cfg.contains("label_smoothing")) train_cfg["label_smoothing"] = 0.0;
  ConfigReader tr(train_cfg, spec.where, "train");
  const train::TrainOptions topt = train::TrainOptions::from_config(tr);
  tr.finish();
  ConfigReader vr(valid_cfg, spec.where, "valid");
  const int64_t valid_max = vr.integer_in("max_sentences", 0, 0, std::numeric_limits<int64_t>::max());  // 0: all
  const int64_t valid_batch = vr.integer_in("batch_size", 64, 1, models::kMaxBatch);
  vr.finish();

  if (!spec.resuming()) {
    // Schedule defaults: warm-up over the first 10% of the updates, then cosine to 0; peak 5e-5
    // (Devlin et al.'s fine-tuning rate) from a pretrained encoder, 1e-3 from scratch.
    nlohmann::json& sc = spec.config["schedule"];
    if (!sc.is_object()) sc = nlohmann::json::object();
    if (!sc.contains("type") || sc["type"] == "warmup_cosine") {
      if (!sc.contains("lr")) sc["lr"] = init_from.empty() ? 1e-3 : 5e-5;
      if (!sc.contains("warmup")) sc["warmup"] = std::max<int64_t>(0, topt.max_steps / 10);
    }
  }
  check_schedule_early(spec.config, topt, spec.where);  // before the data is read or a tokenizer learned
  check_optimizer_early(opt_cfg, spec.where);

  const std::vector<TaggedSentence> train_set = read_conll_file(spec.train);
  std::vector<TaggedSentence> valid_set = read_conll_file(spec.valid);
  keep_spread(valid_set, valid_max);

  manual_seed(seed);  // initialisation and dropout draw from the default generator
  io::BertTaggerBundle bundle;
  if (spec.resuming()) {
    bundle = io::load_bert_tagger(spec.checkpoint);
    QKV_CHECK(bundle.tokenizer != nullptr, spec.checkpoint, "has no tokenizer to resume with");
    if (init_from.empty()) check_resumed_model(spec, bundle.config);  // with init_from run.json has no model
  } else {
    fs::create_directories(spec.dir);
    std::vector<std::string> labels = tag_names(train_set);
    if (!init_from.empty()) {
      bundle = io::bert_tagger_from_pretrained(init_from, std::move(labels));
      QKV_CHECK(bundle.tokenizer != nullptr, init_from, "has no tokenizer (tokenizer.json or vocab.txt)");
      std::fprintf(stderr, "qkv train: from %s: %s", init_from.c_str(), bundle.report.summary().c_str());
    } else {
      nlohmann::json& m = spec.config["model"];  // null when absent: the defaults make it an object
      const nlohmann::json defaults{{"max_position_embeddings", max_len}};
      check_fits_positions(max_len, "data.max_len",
                           check_model_section<models::BertConfig>(m, defaults, spec.where).max_position_embeddings,
                           "max_position_embeddings", spec.where);  // before the vocabulary is learned
      std::shared_ptr<text::Tokenizer> tok = make_bert_tokenizer(
          tok_cfg, spec.where, run.tokenizer_path, sentence_texts(train_set), (fs::path(spec.dir) / "work").string());
      const auto cfg = new_model_config<models::BertConfig>(m, defaults, *tok, spec.where);
      bundle = io::make_bert_tagger(cfg, std::move(labels));
      bundle.tokenizer = tok;
    }
    fix_cosine_schedule(spec.config, topt, spec.where);
    write_run_json(spec);
  }
  check_fits_positions(max_len, "data.max_len", bundle.config.max_position_embeddings, "max_position_embeddings",
                       spec.where);
  bundle.model->train();

  const train::TagSpecials sp = train::TagSpecials::of(*bundle.tokenizer);
  const auto train_labels = label_ids(train_set, bundle.labels, spec.train);
  label_ids(valid_set, bundle.labels, spec.valid);  // every validation tag must be a label
  std::vector<train::TagExample> examples;
  int64_t cut = 0, words = 0;
  for (size_t s = 0; s < train_set.size(); ++s) {
    auto ex = train::sentence_tag_examples(*bundle.tokenizer, sp, train_set[s].words, train_labels[s], max_len, &cut);
    for (auto& e : ex) examples.push_back(std::move(e));
    words += int64_t(train_set[s].words.size());
  }
  const size_t n_windows = examples.size();
  train::TagExampleStream stream(std::move(examples), batch, sp.pad, seed);
  const bool chunked = is_chunk_tagset(bundle.labels);
  std::fprintf(stderr, "qkv train: %zu training sentences (%lld words, %zu windows of <= %lld pieces, %lld words cut "
               "to their first pieces), %zu validation sentences, %zu labels (%s), vocabulary %d, %lld parameters\n",
               train_set.size(), (long long)words, n_windows, (long long)max_len, (long long)cut, valid_set.size(),
               bundle.labels.size(), chunked ? "chunk tags: entity F1" : "token accuracy",
               bundle.tokenizer->vocab_size(), (long long)bundle.model->num_parameters());

  auto optimizer = make_optimizer(opt_cfg, spec.where, *bundle.model);
  auto schedule = schedule_from_config(spec.config, spec.where);

  std::vector<std::vector<std::string>> valid_words, valid_gold;
  for (const auto& s : valid_set) {
    valid_words.push_back(s.words);
    valid_gold.push_back(s.tags);
  }
  const Tagger tagger(bundle);
  train::TrainCallbacks cb;
  cb.write_model = [&](const std::string& dir) { io::save_bert_tagger(dir, bundle); };
  cb.validate = [&]() {
    TagOptions to;
    to.batch_size = valid_batch;
    to.max_len = max_len;
    std::vector<std::vector<std::string>> pred;
    for (auto& r : tagger.tag(valid_words, to)) pred.push_back(std::move(r.tags));
    const TagScores sc = score_tags(pred, valid_gold);
    std::map<std::string, double> m{{"valid_accuracy", sc.accuracy}};
    if (chunked) {
      m["valid_precision"] = sc.precision;
      m["valid_recall"] = sc.recall;
      m["valid_f1"] = sc.f1;
      std::fprintf(stderr, "\nqkv train: valid accuracy %.4f  entity P %.4f R %.4f F1 %.4f (%lld words, %lld entities)\n",
                   sc.accuracy, sc.precision, sc.recall, sc.f1, (long long)sc.words, (long long)sc.n_gold);
    } else {
      std::fprintf(stderr, "\nqkv train: valid accuracy %.4f (%lld words)\n", sc.accuracy, (long long)sc.words);
    }
    return m;
  };
  cb.best_metric = chunked ? "valid_f1" : "valid_accuracy";

  train::TaggingTask task(*bundle.model, stream);
  train::Trainer trainer(task, *optimizer, *schedule, topt, spec.dir, cb);
  TaggerRunResult result;
  result.outcome = resume_and_run(trainer, spec);
  result.steps = trainer.step();
  result.best_metric = cb.best_metric;
  result.best_score = std::max(0.0, trainer.best_score());
  result.model_dir = publish_model(spec.dir, topt.average_last);
  return result;
}

}  // namespace qkv::tasks
