// tasks::train_classifier: fine-tuning a GPT or a BERT for classification (see the header).
#include "qkv/tasks/cls_training.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <optional>

#include "qkv/autograd/node.h"
#include "qkv/data/corpus_mono.h"
#include "qkv/data/corpus_pairs.h"
#include "qkv/eval/classification.h"
#include "qkv/io/gpt2.h"
#include "qkv/io/gpt2_cls.h"
#include "qkv/models/gpt_vocab.h"
#include "qkv/models/model_size.h"
#include "qkv/tasks/bert_pretraining.h"
#include "qkv/tasks/classifier.h"
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

// Byte-level BPE learned from every training text (the "tokenizer" section), <|endoftext|> first.
std::shared_ptr<text::Tokenizer> learn_tokenizer(const nlohmann::json& cfg, const LabelledSet& train,
                                                 const std::string& where) {
  ConfigReader r(cfg, where, "tokenizer");
  text::BpeTrainOptions o;
  o.byte_level = true;
  o.vocab_size = int(r.integer_in("vocab_size", 4000, 1, int64_t(1) << 24));
  o.min_frequency = r.integer_in("min_frequency", 2, 1, std::numeric_limits<int64_t>::max());
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

std::vector<train::ClsExample> encode_set(const LabelledSet& s, const Classifier& clf, const std::string& name,
                                          int64_t* truncated) {
  std::map<std::string, int64_t> id;
  for (size_t i = 0; i < clf.labels().size(); ++i) id[clf.labels()[i]] = int64_t(i);
  std::vector<train::ClsExample> out(s.inputs.size());
  *truncated = 0;
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    auto it = id.find(s.gold[i]);
    QKV_CHECK(it != id.end(), name + ":" + std::to_string(s.lines[i]), "label '", s.gold[i],
              "' does not occur in the training set");
    bool cut = false;
    out[i] = clf.encode(s.inputs[i], &cut);
    out[i].label = it->second;
    *truncated += cut;
  }
  return out;
}

// GPT: a pretrained GPT-2-layout directory (init_from) or a fresh GptConfig with byte-level BPE
// learned from the training texts; [START] [DELIM] [EXTRACT] added to the tokenizer (and rows to
// the embedding).
io::GptClassifierBundle new_gpt_classifier(const std::string& init_from, nlohmann::json model_cfg,
                                           const nlohmann::json& tok_cfg, const nlohmann::json& names_cfg,
                                           const LabelledSet& train_set, int64_t max_len, const std::string& where) {
  io::GptClassifierBundle bundle;
  bundle.labels = label_names(train_set.gold);
  bundle.pairs = train_set.pairs;
  // The special tokens' names, read and checked before anything is loaded or learned (names that
  // were not distinct failed after BPE, naming no field).
  ConfigReader nr(names_cfg, where, "special_tokens");
  text::FinetuneTokenNames names;
  names.start = nr.string("start", names.start);
  names.delim = nr.string("delim", names.delim);
  names.extract = nr.string("extract", names.extract);
  nr.finish();
  text::check_finetune_token_names(names, where + ": section 'special_tokens'");
  std::shared_ptr<models::Gpt> body;
  if (!init_from.empty()) {
    QKV_CHECK(model_cfg.empty() && tok_cfg.empty(), where,
              "give either init_from (a pretrained model and its tokenizer) or model + tokenizer, not both");
    io::GptBundle g = io::load_gpt2(init_from);
    QKV_CHECK(g.tokenizer != nullptr, init_from, "has no tokenizer (tokenizer.json or encoder.json + vocab.bpe)");
    bundle.tokenizer = g.tokenizer;
    body = g.model;
  } else {
    const int64_t positions =
        check_model_section<models::GptConfig>(model_cfg, nlohmann::json::object(), where).n_positions;
    check_fits_positions(max_len, "data.max_len", positions, "n_positions", where);
    std::fprintf(stderr, "qkv train: learning byte-level BPE from %zu training examples ...\n", train_set.gold.size());
    bundle.tokenizer = learn_tokenizer(tok_cfg, train_set, where);
  }
  const int added = text::add_finetune_tokens(*bundle.tokenizer, names);
  if (body) {  // the new ids follow the tokenizer's vocabulary; rows the model has beyond it stay
    body = models::grow_vocab(*body, std::max<int64_t>(bundle.tokenizer->vocab_size(), body->config().vocab_size));
    std::fprintf(stderr, "qkv train: %d tokens added to the tokenizer of %s; vocabulary %lld\n", added,
                 init_from.c_str(), (long long)body->config().vocab_size);
  } else {
    body = std::make_shared<models::Gpt>(
        new_model_config<models::GptConfig>(model_cfg, nlohmann::json::object(), *bundle.tokenizer, where));
  }
  const int64_t P = body->config().n_positions;
  QKV_CHECK(max_len <= P, where, "field 'data.max_len': ", max_len, " is longer than the model's n_positions ", P,
            init_from.empty() ? "" : " (" + init_from + ")");  // it used to cut every example to P tokens
  bundle.max_len = max_len > 0 ? max_len : P;
  bundle.model = std::make_shared<models::GptClassifier>(body, int64_t(bundle.labels.size()));
  return bundle;
}

// BERT: a BERT directory (init_from: its encoder and WordPiece tokenizer, the classifier newly
// initialised) or a fresh BertConfig with a WordPiece vocabulary learned from the training texts.
io::BertClassifierBundle new_bert_classifier(const std::string& init_from, nlohmann::json model_cfg,
                                             const nlohmann::json& tok_cfg, const io::BertClassifierSpec& spec,
                                             const LabelledSet& train_set, const std::string& flag_tokenizer,
                                             const std::string& work_dir, const std::string& where) {
  if (!init_from.empty()) {
    QKV_CHECK(model_cfg.empty() && tok_cfg.empty() && flag_tokenizer.empty(), where,
              "give either init_from (a pretrained BERT and its tokenizer) or model + tokenizer, not both");
    io::BertClassifierBundle b = io::load_bert_for_classification(init_from, spec);
    QKV_CHECK(!spec.pairs || b.model->bert->config().type_vocab_size >= 2, init_from,
              "has type_vocab_size 1: the sentence pairs of the training file need 2 segment types (a and b)");
    std::fprintf(stderr, "qkv train: from %s: %s", init_from.c_str(), b.report.summary().c_str());
    return b;
  }
  nlohmann::json defaults = nlohmann::json::object();
  if (spec.max_len > 0) defaults["max_position_embeddings"] = spec.max_len;
  const models::BertConfig planned = check_model_section<models::BertConfig>(model_cfg, defaults, where);
  check_fits_positions(spec.max_len, "data.max_len", planned.max_position_embeddings, "max_position_embeddings", where);
  // (found at the first step, naming no field, when the pairs' segment ids met the table)
  QKV_CHECK(!spec.pairs || planned.type_vocab_size >= 2, where, "field 'model.type_vocab_size': the sentence pairs of "
            "the training file need 2 segment types (a and b), got ", planned.type_vocab_size);
  std::vector<std::string> texts;
  for (auto& x : train_set.inputs) {
    texts.push_back(x.a);
    if (x.pair) texts.push_back(x.b);
  }
  std::shared_ptr<text::Tokenizer> tok = make_bert_tokenizer(tok_cfg, where, flag_tokenizer, texts, work_dir);
  const auto cfg = new_model_config<models::BertConfig>(model_cfg, defaults, *tok, where);
  return io::make_bert_classifier(cfg, spec, tok);
}

// Validation loss (classification only), accuracy and macro-F1 over the batches, in eval mode.
std::map<std::string, double> validate(const Classifier& clf, const std::vector<train::ClsBatch>& batches) {
  const nn::EvalScope eval_mode(clf.module());
  NoGradGuard ng;
  std::vector<int> pred, gold;
  double nll = 0;
  const int64_t C = int64_t(clf.labels().size());
  for (const train::ClsBatch& b : batches) {
    const Tensor logits = clf.logits(b).contiguous();  // (B, C)
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
  const eval::ClassificationReport rep = eval::classification_report(pred, gold, int(C));
  std::map<std::string, double> m{{"valid_loss", nll / double(gold.size())},
                                  {"valid_accuracy", rep.accuracy},
                                  {"valid_macro_f1", rep.macro.f1}};
  std::fprintf(stderr, "\nqkv train: valid loss %.4f  accuracy %.4f  macro-F1 %.4f\n", m["valid_loss"],
               m["valid_accuracy"], m["valid_macro_f1"]);
  return m;
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
  if (name == "conll2010") return data::build_conll2010_corpus(o).out_dir;
  fail("corpus", "unknown classification corpus '", name,
       "' (expected cls-debian, pairs-debian, sentiment, pang-lee-reviews, pang-lee-sentences or conll2010)");
}

namespace {

// A resumed classifier continues the checkpoint's: run.json's model (the backbone's config, as a
// new run records it), data.max_len and a BERT's pooling must say what the checkpoint says (they
// were ignored: the run went on with the checkpoint's while run.json said otherwise).
void check_resumed_classifier(const RunDir& spec, const Classifier& clf, int64_t max_len,
                              const io::BertClassifierSpec* bert) {
  const std::string config_json = spec.checkpoint + "/config.json";
  int64_t positions = 0;
  if (bert) {
    const models::BertForSequenceClassification& m = *clf.bert()->model;
    check_resumed_model(spec, m.bert->config());
    check_resumed_field(spec, "pooling", models::bert_cls_pooling_name(bert->pooling),
                        models::bert_cls_pooling_name(m.pooling), config_json);
    positions = m.bert->config().max_position_embeddings;
  } else {
    check_resumed_model(spec, clf.gpt()->model->transformer->config());
    positions = clf.gpt()->model->transformer->config().n_positions;
  }
  // data.max_len 0 is the model's positions (a longer one is refused on a new run)
  check_resumed_field(spec, "data.max_len", max_len > 0 ? max_len : positions, clf.max_len(), config_json);
}

}  // namespace

ClassifierRunResult train_classifier(const ClassifierRun& run) {
  RunDir spec = open_run_dir(run.config_path, run.out_dir, run.resume);
  if (!spec.resuming())
    resolve_data_files(run, spec, {ensure_cls_corpus, "train.tsv", "valid.tsv"},
                       "give --corpus NAME or both --train and --valid");
  apply_run_flags(spec, run);
  const std::string& where = spec.where;

  ConfigReader top(spec.config, where);
  const std::string model_type = top.string("model_type");
  QKV_CHECK(model_type == "gpt_classifier" || model_type == "bert_classifier", top.where("model_type"),
            "expected \"gpt_classifier\" or \"bert_classifier\", got \"", model_type, "\"");
  const bool bert = model_type == "bert_classifier";
  QKV_CHECK(bert || run.tokenizer_path.empty(), "qkv train", "--tokenizer is not used by gpt_classifier runs: the "
            "tokenizer comes from init_from, or is learned per the config's tokenizer section");
  const std::string init_from = top.optional_path("init_from");
  nlohmann::json model_cfg = top.object("model", false), tok_cfg = top.object("tokenizer", false),
                 data_cfg = top.object("data", false), opt_cfg = top.object("optimizer", false),
                 sched_cfg = top.object("schedule", false), train_cfg = top.object("train", false),
                 valid_cfg = top.object("valid", false), names_cfg;
  const int64_t num_labels = top.integer("num_labels", 0);  // 0: as many as the training set has
  double lm_weight = 0;
  io::BertClassifierSpec bert_spec;
  if (bert) {  // BertForSequenceClassification's choices
    try {
      bert_spec.pooling = models::parse_bert_cls_pooling(top.string("pooling", "pooler"));
    } catch (const Error& e) {
      fail(top.where("pooling"), e.what());
    }
    bert_spec.classifier_dropout = top.number("classifier_dropout", -1);  // -1: not given (hidden_dropout_prob)
    QKV_CHECK(!top.has("classifier_dropout") || (bert_spec.classifier_dropout >= 0 && bert_spec.classifier_dropout < 1),
              top.where("classifier_dropout"), "expected a rate in [0, 1), got ", bert_spec.classifier_dropout);
  } else {  // GPT-1's
    names_cfg = top.object("special_tokens", false);
    lm_weight = top.number("lm_weight", 0.5);
    QKV_CHECK(lm_weight >= 0, top.where("lm_weight"), "expected >= 0, got ", lm_weight);
  }
  const uint64_t seed = uint64_t(top.integer("seed", 1));
  top.finish();
  // The optimizer, schedule and trainer sections, checked before the data is read or a tokenizer learned.
  if (!opt_cfg.contains("type")) opt_cfg["type"] = "adamw";
  if (!opt_cfg.contains("lr")) opt_cfg["lr"] = bert ? 2e-5 : 6.25e-5;  // the papers' fine-tuning rates
  check_optimizer_early(opt_cfg, where);
  if (sched_cfg.empty()) sched_cfg = {{"type", "constant"}, {"lr", opt_cfg["lr"]}};
  auto schedule = schedule_from_config(nlohmann::json{{"schedule", sched_cfg}}, where);
  if (!train_cfg.contains("label_smoothing")) train_cfg["label_smoothing"] = 0.0;
  ConfigReader tr(train_cfg, where, "train");
  train::TrainOptions topt = train::TrainOptions::from_config(tr);
  tr.finish();

  const LabelledSet train_set = read_labelled_tsv(spec.train), valid_set = read_labelled_tsv(spec.valid);
  QKV_CHECK(train_set.pairs == valid_set.pairs, spec.valid, "holds ", valid_set.pairs ? "pairs" : "single texts",
            " but the training file ", spec.train, " holds ", train_set.pairs ? "pairs" : "single texts");
  ConfigReader dr(data_cfg, where, "data");
  const int64_t max_len = dr.integer_in("max_len", 0, 0, models::kMaxPositions);  // 0: the model's positions
  const int64_t batch_size = dr.integer_in("batch_size", 32, 1, models::kMaxBatch);
  dr.finish();
  // The special tokens and a token of each text: [CLS] a [SEP] (b [SEP]), or GPT's [START] a ([DELIM]
  // b) [EXTRACT]; a shorter max_len failed after the tokenizer was learned, naming no field.
  const int64_t least = train_set.pairs ? 5 : 3;
  QKV_CHECK(max_len == 0 || max_len >= least, dr.where("max_len"), "expected 0 (the model's positions) or at least ",
            least, " (the special tokens and a token of each text), got ", max_len);

  manual_seed(seed);  // initialisation and dropout draw from the default generator
  std::optional<Classifier> clf;
  if (spec.resuming()) {
    const ClassifierFamily fam = classifier_family(spec.checkpoint);
    QKV_CHECK((fam == ClassifierFamily::bert) == bert, spec.checkpoint, "holds a ",
              fam == ClassifierFamily::bert ? "BERT" : "GPT", " classifier but the run's model_type is ", model_type);
    clf.emplace(spec.checkpoint);
    check_resumed_classifier(spec, *clf, max_len, bert ? &bert_spec : nullptr);
  } else {
    const std::vector<std::string> labels = label_names(train_set.gold);
    QKV_CHECK(labels.size() >= 2, spec.train, "holds ", labels.size(), " distinct label", labels.size() == 1 ? "" : "s",
              ": a classifier needs at least 2");
    QKV_CHECK(num_labels == 0 || num_labels == int64_t(labels.size()), where, "field 'num_labels': ", num_labels,
              " but the training file ", spec.train, " has ", labels.size(), " distinct labels");
    for (size_t i = 0; i < valid_set.gold.size(); ++i)  // before a tokenizer is learned (encode_set checks again)
      QKV_CHECK(std::find(labels.begin(), labels.end(), valid_set.gold[i]) != labels.end(),
                spec.valid + ":" + std::to_string(valid_set.lines[i]), "label '", valid_set.gold[i],
                "' does not occur in the training set");
    fs::create_directories(spec.dir);
    if (bert) {
      bert_spec.labels = labels;
      bert_spec.pairs = train_set.pairs;
      bert_spec.max_len = max_len;
      clf.emplace(new_bert_classifier(init_from, model_cfg, tok_cfg, bert_spec, train_set, run.tokenizer_path,
                                      (fs::path(spec.dir) / "work").string(), where));
      spec.config["model"] = clf->bert()->model->bert->config();
    } else {
      clf.emplace(new_gpt_classifier(init_from, model_cfg, tok_cfg, names_cfg, train_set, max_len, where));
      spec.config["model"] = clf->gpt()->model->transformer->config();
    }
    write_file_atomic((fs::path(spec.dir) / "run.json").string(),
                      nlohmann::json{{"config", spec.config}, {"train", spec.train}, {"valid", spec.valid},
                                     {"labels", labels}}
                              .dump(2) + "\n");
  }
  clf->module().train();

  int64_t cut_train = 0, cut_valid = 0;
  auto train_ex = encode_set(train_set, *clf, spec.train, &cut_train);
  ConfigReader vr(valid_cfg, where, "valid");
  const int64_t valid_max = vr.integer_in("max_examples", 2000, 0, std::numeric_limits<int64_t>::max());
  const int64_t valid_batch = vr.integer_in("batch_size", 64, 1, models::kMaxBatch);
  vr.finish();
  auto valid_ex = encode_set(valid_set, *clf, spec.valid, &cut_valid);
  keep_spread(valid_ex, valid_max);
  std::fprintf(stderr,
               "qkv train: %zu training and %zu validation examples (%lld and %lld truncated to %lld tokens), %zu "
               "labels, %s, %lld parameters\n",
               train_ex.size(), valid_ex.size(), (long long)cut_train, (long long)cut_valid, (long long)clf->max_len(),
               clf->labels().size(), clf->pairs() ? "pairs" : "single texts",
               (long long)clf->module().num_parameters());
  train::ClsExampleStream stream(std::move(train_ex), batch_size, seed);
  const std::vector<train::ClsBatch> valid_batches = train::ClsExampleStream(valid_ex, valid_batch, seed).all_batches();

  auto optimizer = make_optimizer(opt_cfg, where, clf->module());

  train::TrainCallbacks cb;
  cb.best_metric = "valid_accuracy";
  cb.write_model = [&](const std::string& dir) { clf->save(dir); };
  cb.validate = [&]() { return validate(*clf, valid_batches); };

  std::unique_ptr<train::ClassificationTask> task;
  if (bert) task = std::make_unique<train::BertClassificationTask>(*clf->bert()->model, stream);
  else task = std::make_unique<train::GptClassificationTask>(*clf->gpt()->model, stream, lm_weight);
  train::Trainer trainer(*task, *optimizer, *schedule, topt, spec.dir, cb);
  ClassifierRunResult result;
  result.outcome = resume_and_run(trainer, spec);
  result.steps = trainer.step();
  result.best_accuracy = std::max(0.0, trainer.best_score());
  result.model_dir = publish_model(spec.dir, topt.average_last);  // train.average_last, as every run
  return result;
}

}  // namespace qkv::tasks
