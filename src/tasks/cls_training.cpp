// tasks::train_gpt_classifier: fine-tuning a GPT for classification (see the header).
#include "qkv/tasks/cls_training.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "qkv/autograd/node.h"
#include "qkv/data/corpus_mono.h"
#include "qkv/data/corpus_pairs.h"
#include "qkv/eval/classification.h"
#include "qkv/io/gpt2.h"
#include "qkv/io/gpt2_cls.h"
#include "qkv/models/gpt_vocab.h"
#include "qkv/tasks/cls_data.h"
#include "qkv/tensor/rng.h"
#include "qkv/text/bpe_train.h"
#include "qkv/text/finetune_tokens.h"
#include "qkv/train/checkpoint.h"
#include "qkv/train/cls_stream.h"
#include "qkv/train/optim.h"
#include "qkv/train/schedule.h"
#include "qkv/util/config.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace qkv::tasks {
namespace {

nlohmann::json read_json(const std::string& path) {
  try {
    return nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail(path, "not valid JSON: ", e.what());
  }
}

// Byte-level BPE learned from every training text (the "tokenizer" section), <|endoftext|> first.
std::shared_ptr<text::Tokenizer> learn_tokenizer(const nlohmann::json& cfg, const LabelledSet& train) {
  ConfigReader r(cfg, "config", "tokenizer");
  text::BpeTrainOptions o;
  o.byte_level = true;
  o.vocab_size = int(r.integer("vocab_size", 4000));
  o.min_frequency = r.integer("min_frequency", 2);
  o.special_tokens = {"<|endoftext|>"};
  o.unk_token = "";
  r.finish();
  text::WordCounter wc(true);
  for (auto& x : train.inputs) {
    wc.add(x.a);
    if (x.pair) wc.add(x.b);
  }
  text::BpeTrainResult learned = text::learn_bpe(wc.counts(), o);
  text::BpeOptions bo;
  bo.byte_level = true;
  auto tok = std::make_shared<text::BpeTokenizer>(std::move(learned.vocab), std::move(learned.merges), bo);
  tok->set_special(text::Role::Eos, "<|endoftext|>");
  tok->set_special(text::Role::Bos, "<|endoftext|>");
  return tok;
}

std::vector<train::ClsExample> encode_set(const LabelledSet& s, const io::GptClassifierBundle& b,
                                          const std::string& name, int64_t* truncated) {
  std::map<std::string, int64_t> id;
  for (size_t i = 0; i < b.labels.size(); ++i) id[b.labels[i]] = int64_t(i);
  const train::ClsTokens t = train::ClsTokens::of(*b.tokenizer);
  std::vector<train::ClsExample> out(s.inputs.size());
  *truncated = 0;
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    auto it = id.find(s.gold[i]);
    QKV_CHECK(it != id.end(), name, "example ", i + 1, ": label '", s.gold[i], "' does not occur in the training set");
    bool cut = false;
    std::string_view bv = s.inputs[i].b;
    out[i].ids = train::encode_cls_input(*b.tokenizer, t, s.inputs[i].a, s.pairs ? &bv : nullptr, b.max_len, &cut);
    out[i].label = it->second;
    *truncated += cut;
  }
  return out;
}

}  // namespace

std::string ensure_cls_corpus(const std::string& name, const std::string& data_dir) {
  data::ExtraBuildOptions o;
  o.data_dir = data_dir;
  o.verbose = true;
  if (name == "cls-debian") return data::build_cls_corpus(o).out_dir;
  if (name == "pairs-debian") return data::build_summary_pairs_corpus(o).out_dir;
  if (name == "sentiment") return data::build_sentiment_corpus(o).out_dir;
  if (name == "pang-lee-reviews") return data::build_pang_lee_corpus(o, data::PangLee::reviews).out_dir;
  if (name == "pang-lee-sentences") return data::build_pang_lee_corpus(o, data::PangLee::sentences).out_dir;
  fail("corpus", "unknown classification corpus '", name,
       "' (expected cls-debian, pairs-debian, sentiment, pang-lee-reviews or pang-lee-sentences)");
}

ClassifierRunResult train_gpt_classifier(const ClassifierRun& run) {
  QKV_CHECK(run.tokenizer_path.empty(), "qkv train", "--tokenizer is not used by gpt_classifier runs: the tokenizer "
            "comes from init_from, or is learned per the config's tokenizer section");
  std::string out_dir = run.out_dir;
  nlohmann::json config;
  std::string train_path, valid_path, checkpoint;
  if (!run.resume.empty()) {
    out_dir = run.resume;
    const std::string run_json = (fs::path(run.resume) / "run.json").string();
    QKV_CHECK(fs::exists(run_json), run.resume, "not a run directory (no run.json); start a run with --config");
    nlohmann::json rj = read_json(run_json);
    config = rj.at("config");
    train_path = rj.at("train").get<std::string>();
    valid_path = rj.at("valid").get<std::string>();
    auto latest = train::CheckpointManager::latest(run.resume);
    QKV_CHECK(latest.has_value(), run.resume, "no checkpoint to resume from under checkpoints/");
    checkpoint = *latest;
  } else {
    QKV_CHECK(!run.config_path.empty(), "train", "give --config (or --resume RUN)");
    QKV_CHECK(!out_dir.empty(), "train", "give --out RUN_DIR");
    QKV_CHECK(!fs::exists(fs::path(out_dir) / "run.json"), out_dir,
              "already holds a run; use --resume to continue it or choose another --out");
    config = read_json(run.config_path);
    if (!run.corpus.empty()) {
      const std::string dir = ensure_cls_corpus(run.corpus, run.data_dir);
      train_path = (fs::path(dir) / "train.tsv").string();
      valid_path = (fs::path(dir) / "valid.tsv").string();
    }
    if (!run.train_file.empty()) train_path = run.train_file;
    if (!run.valid_file.empty()) valid_path = run.valid_file;
    QKV_CHECK(!train_path.empty() && !valid_path.empty(), "train", "give --corpus NAME or both --train and --valid");
    train_path = fs::absolute(train_path).string();
    valid_path = fs::absolute(valid_path).string();
  }
  if (run.max_steps >= 0) config["train"]["max_steps"] = run.max_steps;
  if (run.max_minutes >= 0) config["train"]["max_minutes"] = run.max_minutes;

  const std::string top_where = run.config_path.empty() ? out_dir + "/run.json" : run.config_path;
  ConfigReader top(config, top_where);
  const std::string model_type = top.string("model_type");
  QKV_CHECK(model_type == "gpt_classifier", top.where("model_type"), "expected \"gpt_classifier\", got \"", model_type,
            "\"");
  const std::string init_from = top.string("init_from", "");
  nlohmann::json model_cfg = top.object("model", false), tok_cfg = top.object("tokenizer", false),
                 names_cfg = top.object("special_tokens", false), data_cfg = top.object("data", false),
                 opt_cfg = top.object("optimizer", false), sched_cfg = top.object("schedule", false),
                 train_cfg = top.object("train", false), valid_cfg = top.object("valid", false);
  const double lm_weight = top.number("lm_weight", 0.5);
  const uint64_t seed = uint64_t(top.integer("seed", 1));
  top.finish();
  QKV_CHECK(lm_weight >= 0, top_where, "field 'lm_weight': expected >= 0, got ", lm_weight);

  const LabelledSet train_set = read_labelled_tsv(train_path), valid_set = read_labelled_tsv(valid_path);
  QKV_CHECK(train_set.pairs == valid_set.pairs, valid_path, "holds ", valid_set.pairs ? "pairs" : "single texts",
            " but the training file ", train_path, " holds ", train_set.pairs ? "pairs" : "single texts");
  ConfigReader dr(data_cfg, top_where, "data");
  int64_t max_len = dr.integer("max_len", 0);
  const int64_t batch_size = dr.integer("batch_size", 32);
  dr.finish();

  manual_seed(seed);  // initialisation and dropout draw from the default generator
  io::GptClassifierBundle bundle;
  if (!checkpoint.empty()) {
    bundle = io::load_gpt2_classifier(checkpoint);
    bundle.model->train();
  } else {
    fs::create_directories(out_dir);
    bundle.labels = label_names(train_set.gold);
    bundle.pairs = train_set.pairs;
    std::shared_ptr<models::Gpt> body;
    if (!init_from.empty()) {
      QKV_CHECK(model_cfg.empty() && tok_cfg.empty(), top_where,
                "give either init_from (a pretrained model and its tokenizer) or model + tokenizer, not both");
      io::GptBundle g = io::load_gpt2(init_from);
      QKV_CHECK(g.tokenizer != nullptr, init_from, "has no tokenizer (tokenizer.json or encoder.json + vocab.bpe)");
      bundle.tokenizer = g.tokenizer;
      body = g.model;
    } else {
      std::fprintf(stderr, "qkv train: learning byte-level BPE from %zu training examples ...\n", train_set.gold.size());
      bundle.tokenizer = learn_tokenizer(tok_cfg, train_set);
    }
    ConfigReader nr(names_cfg, top_where, "special_tokens");
    text::FinetuneTokenNames names;
    names.start = nr.string("start", names.start);
    names.delim = nr.string("delim", names.delim);
    names.extract = nr.string("extract", names.extract);
    nr.finish();
    const int added = text::add_finetune_tokens(*bundle.tokenizer, names);
    if (body) {  // the new ids follow the tokenizer's vocabulary; rows the model has beyond it stay
      body = models::grow_vocab(*body, std::max<int64_t>(bundle.tokenizer->vocab_size(), body->config().vocab_size));
      std::fprintf(stderr, "qkv train: %d tokens added to the tokenizer of %s; vocabulary %lld\n", added,
                   init_from.c_str(), (long long)body->config().vocab_size);
    } else {
      model_cfg["vocab_size"] = bundle.tokenizer->vocab_size();
      models::GptConfig gc;
      try {
        gc = model_cfg.get<models::GptConfig>();
      } catch (const nlohmann::json::exception& e) {
        fail(top_where, "field 'model': ", e.what());
      }
      body = std::make_shared<models::Gpt>(gc);
    }
    const int64_t P = body->config().n_positions;
    bundle.max_len = max_len > 0 ? std::min(max_len, P) : P;
    bundle.model = std::make_shared<models::GptClassifier>(body, int64_t(bundle.labels.size()));
    config["model"] = body->config();
    config["model_type"] = model_type;
    write_file_atomic((fs::path(out_dir) / "run.json").string(),
                      nlohmann::json{{"config", config}, {"train", train_path}, {"valid", valid_path},
                                     {"labels", bundle.labels}}
                              .dump(2) + "\n");
  }
  max_len = bundle.max_len;

  int64_t cut_train = 0, cut_valid = 0;
  auto train_ex = encode_set(train_set, bundle, train_path, &cut_train);
  ConfigReader vr(valid_cfg, top_where, "valid");
  const int64_t valid_max = vr.integer("max_examples", 2000), valid_batch = vr.integer("batch_size", 64);
  vr.finish();
  auto valid_ex = encode_set(valid_set, bundle, valid_path, &cut_valid);
  if (int64_t(valid_ex.size()) > valid_max) valid_ex.resize(size_t(valid_max));
  std::fprintf(stderr,
               "qkv train: %zu training and %zu validation examples (%lld and %lld truncated to %lld tokens), %zu "
               "labels, %s, %lld parameters\n",
               train_ex.size(), valid_ex.size(), (long long)cut_train, (long long)cut_valid, (long long)max_len,
               bundle.labels.size(), bundle.pairs ? "pairs" : "single texts",
               (long long)bundle.model->num_parameters());
  train::ClsExampleStream stream(std::move(train_ex), batch_size, seed);
  const std::vector<train::ClsBatch> valid_batches = train::ClsExampleStream(valid_ex, valid_batch, seed).all_batches();

  if (!opt_cfg.contains("type")) opt_cfg["type"] = "adamw";
  if (!opt_cfg.contains("lr")) opt_cfg["lr"] = 6.25e-5;  // GPT-1's fine-tuning rate
  auto optimizer = make_optimizer(opt_cfg, top_where, *bundle.model);
  if (sched_cfg.empty()) sched_cfg = {{"type", "constant"}, {"lr", opt_cfg["lr"]}};
  auto schedule = make_schedule(sched_cfg);
  if (!train_cfg.contains("label_smoothing")) train_cfg["label_smoothing"] = 0.0;
  ConfigReader tr(train_cfg, top_where, "train");
  train::TrainOptions topt = train::TrainOptions::from_config(tr);
  tr.finish();

  train::TrainCallbacks cb;
  cb.best_metric = "valid_accuracy";
  cb.write_model = [&](const std::string& dir) { io::save_gpt2_classifier(dir, bundle); };
  cb.validate = [&]() {
    models::GptClassifier& model = *bundle.model;
    const bool was = model.is_training();
    model.eval();
    NoGradGuard ng;
    std::vector<int> pred, gold;
    double nll = 0;
    const int64_t C = model.num_labels;
    for (const train::ClsBatch& b : valid_batches) {
      Tensor logits = model.forward(b.ids, b.key_pad, b.extract_pos).contiguous();  // (B, C)
      const float* lg = logits.data<float>();
      const int64_t* y = b.labels.data<int64_t>();
      for (int64_t r = 0; r < logits.size(0); ++r) {
        const float* row = lg + r * C;
        const int64_t best = std::max_element(row, row + C) - row;
        double z = 0;
        for (int64_t c = 0; c < C; ++c) z += std::exp(double(row[c]) - double(row[best]));
        nll += std::log(z) + double(row[best]) - double(row[y[r]]);  // -log softmax(row)[y]
        pred.push_back(int(best));
        gold.push_back(int(y[r]));
      }
    }
    model.train(was);
    const eval::ClassificationReport rep = eval::classification_report(pred, gold, int(C));
    std::map<std::string, double> m{{"valid_loss", nll / double(gold.size())},
                                    {"valid_accuracy", rep.accuracy},
                                    {"valid_macro_f1", rep.macro.f1}};
    std::fprintf(stderr, "\nqkv train: valid loss %.4f  accuracy %.4f  macro-F1 %.4f\n", m["valid_loss"],
                 m["valid_accuracy"], m["valid_macro_f1"]);
    return m;
  };

  train::GptClassificationTask task(*bundle.model, stream, lm_weight);
  train::Trainer trainer(task, *optimizer, *schedule, topt, out_dir, cb);
  if (!checkpoint.empty()) {
    trainer.restore_training_state(checkpoint);
    std::fprintf(stderr, "qkv train: resumed from %s at step %lld\n", checkpoint.c_str(), (long long)trainer.step());
  }
  const train::Outcome outcome = trainer.run();

  auto best = train::CheckpointManager::best(out_dir);
  const std::string publish = best ? *best : *train::CheckpointManager::latest(out_dir);
  train::copy_directory_atomic(publish, (fs::path(out_dir) / "model").string());
  fs::remove(fs::path(out_dir) / "model" / "training_state.safetensors");
  ClassifierRunResult result;
  result.outcome = outcome;
  result.steps = trainer.step();
  result.best_accuracy = std::max(0.0, trainer.best_bleu());
  result.model_dir = (fs::path(out_dir) / "model").string();
  return result;
}

}  // namespace qkv::tasks
