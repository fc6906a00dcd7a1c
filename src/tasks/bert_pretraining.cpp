// tasks::train_bert: BERT MLM + NSP pretraining (qkv/tasks/bert_pretraining.h).
#include "qkv/tasks/bert_pretraining.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <set>
#include <unordered_map>

#include "qkv/data/documents.h"
#include "qkv/io/bert.h"
#include "qkv/models/model_size.h"
#include "qkv/tensor/rng.h"
#include "qkv/text/bpe_train.h"
#include "qkv/text/wordpiece.h"
#include "qkv/train/bert_pretrain.h"
#include "qkv/train/optim.h"
#include "qkv/train/schedule.h"
#include "qkv/util/config.h"
#include "qkv/util/error_context.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace qkv::tasks {

std::vector<std::string> split_segments(const std::string& document) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    const size_t b = cur.find_first_not_of(" \t\r"), e = cur.find_last_not_of(" \t\r");
    if (b != std::string::npos) out.push_back(cur.substr(b, e - b + 1));
    cur.clear();
  };
  for (size_t i = 0; i < document.size(); ++i) {
    const char c = document[i];
    if (c == '\n') {
      flush();
      continue;
    }
    cur += c;
    if ((c == '.' || c == '!' || c == '?') && i + 1 < document.size() && document[i + 1] == ' ') flush();
  }
  flush();
  return out;
}

// A WordPiece vocabulary learned on the documents (tasks/bert_pretraining.h).
std::shared_ptr<text::Tokenizer> learn_wordpiece(const std::vector<std::string>& docs, int vocab_size,
                                                 int64_t min_frequency, const std::string& work_dir, bool lowercase) {
  std::unordered_map<std::string, int64_t> counts;
  text::BertNormalizeOptions norm;
  norm.lowercase = norm.strip_accents = lowercase;  // BERT strips accents exactly when it lower-cases
  for (const auto& d : docs)
    for (auto& w : text::bert_basic_tokenize(d, norm)) ++counts[w];
  text::BpeTrainOptions o;
  o.byte_level = false;
  o.end_of_word_suffix.clear();
  o.special_tokens.clear();
  o.unk_token.clear();
  o.vocab_size = std::max(1, (vocab_size - 5) / 2);
  o.min_frequency = min_frequency;
  std::fprintf(stderr, "qkv train: learning a WordPiece vocabulary of about %d tokens from %zu documents ...\n",
               vocab_size, docs.size());
  const text::BpeTrainResult res = text::learn_bpe(counts, o);
  std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  std::set<std::string> seen(vocab.begin(), vocab.end());
  for (const std::string& prefix : {std::string(), std::string("##")})
    for (const auto& t : res.vocab)
      if (seen.insert(prefix + t).second) vocab.push_back(prefix + t);
  fs::create_directories(work_dir);
  const std::string file = (fs::path(work_dir) / "vocab.txt").string();
  std::string text;
  for (const auto& t : vocab) text += t + "\n";
  write_file_atomic(file, text);
  std::shared_ptr<text::Tokenizer> tok = text::WordPieceTokenizer::load_vocab_txt(file);
  std::error_code ec;
  fs::remove(file, ec);
  fs::remove(work_dir, ec);
  return tok;
}

namespace {

train::BertSpecials specials_of(const text::Tokenizer& tok, int64_t vocab, const std::string& where) {
  train::BertSpecials sp;
  auto need = [&](text::Role r, const char* name) {
    auto id = tok.special_id(r);
    QKV_CHECK(id.has_value(), where, "the tokenizer has no ", name, " token: BERT pretraining needs [CLS], [SEP], "
              "[PAD] and [MASK]");
    return int64_t(*id);
  };
  sp.cls = need(text::Role::Cls, "[CLS]");
  sp.sep = need(text::Role::Sep, "[SEP]");
  sp.pad = need(text::Role::Pad, "[PAD]");
  sp.mask = need(text::Role::Mask, "[MASK]");
  sp.vocab = vocab;
  sp.is_special.assign(size_t(vocab), 0);
  for (int64_t i = 0; i < vocab; ++i)
    // ids past the tokenizer's (model.vocab_size may be larger) are never real tokens
    sp.is_special[size_t(i)] = i >= tok.vocab_size() || tok.is_special_id(int32_t(i));
  return sp;
}

// documents -> segments -> ids (no specials).
std::vector<std::vector<std::vector<int64_t>>> encode_segments(const std::vector<std::string>& docs,
                                                               const text::Tokenizer& tok) {
  std::vector<std::vector<std::vector<int64_t>>> out(docs.size());
#pragma omp parallel for schedule(dynamic, 64)
  for (size_t i = 0; i < docs.size(); ++i)
    for (const std::string& s : split_segments(docs[i])) {
      std::vector<int32_t> ids = tok.encode(s);
      out[i].emplace_back(ids.begin(), ids.end());
    }
  return out;
}

}  // namespace

std::shared_ptr<text::Tokenizer> make_bert_tokenizer(const nlohmann::json& section, const std::string& where,
                                                     const std::string& flag_path, const std::vector<std::string>& docs,
                                                     const std::string& work_dir) {
  ConfigReader r(section, where, "tokenizer");
  if (auto given = given_tokenizer(r, flag_path)) {
    // Every BERT task frames its input with [CLS] and [SEP]: a tokenizer without them (a GPT's)
    // failed later naming no file.
    const std::string source = flag_path.empty() ? r.where("path") : flag_path;
    for (const auto& [role, name] : {std::pair{text::Role::Cls, "[CLS]"}, std::pair{text::Role::Sep, "[SEP]"}})
      QKV_CHECK(given->special_id(role).has_value(), source, "has no ", name,
                " token: a BERT model's tokenizer needs [CLS] and [SEP] (bert-base-uncased's vocab.txt has them)");
    return given;
  }
  const std::string kind = r.string("kind", "wordpiece");
  QKV_CHECK(kind == "wordpiece", r.where("kind"), "BERT learns a WordPiece vocabulary: expected \"wordpiece\", got \"",
            kind, "\" (or give tokenizer.path)");
  const int vocab_size = int(r.integer_in("vocab_size", 8192, 1, int64_t(1) << 24));
  const int64_t min_frequency = r.integer_in("min_frequency", 2, 1, std::numeric_limits<int64_t>::max());
  const bool lowercase = r.boolean("lowercase", true);
  r.finish();
  return learn_wordpiece(docs, vocab_size, min_frequency, work_dir, lowercase);
}

BertRunResult train_bert(const TrainingRun& run) {
  RunDir spec = open_run_dir(run.config_path, run.out_dir, run.resume);
  io::BertBundle bundle;
  if (spec.resuming()) {
    bundle = io::load_bert(spec.checkpoint, {true, true});
    QKV_CHECK(bundle.tokenizer != nullptr, spec.checkpoint, "has no tokenizer to resume with");
    QKV_CHECK(bundle.mlm && bundle.nsp && bundle.report.initialised.empty(), spec.checkpoint,
              "does not hold the MLM and NSP heads to resume with:\n", bundle.report.summary());
  } else {
    resolve_document_files(run, spec);
  }
  apply_run_flags(spec, run);
  RunSections sec = read_run_sections(spec.config, spec.where, "bert");
  QKV_CHECK(sec.model_type == "bert", spec.where, "field 'model_type': train_bert trains \"bert\" models, got \"",
            sec.model_type, "\"");
  if (spec.resuming()) check_resumed_model(spec, bundle.config);

  ConfigReader dr(sec.data, spec.where, "data");
  const int64_t max_len = dr.integer_in("max_len", 128, 5, models::kMaxPositions);  // 5: [CLS] a [SEP] b [SEP]
  const int64_t batch = dr.integer_in("batch_size", 16, 1, models::kMaxBatch);
  dr.finish();

  ConfigReader tr(sec.train, spec.where, "train");
  const train::TrainOptions topt = train::TrainOptions::from_config(tr);
  tr.finish();
  check_schedule_early(spec.config, topt, spec.where);
  check_optimizer_early(sec.optimizer, spec.where);
  ConfigReader vr(sec.valid, spec.where, "valid");
  const int64_t valid_max_pairs = vr.integer_in("max_pairs", 0, 0, std::numeric_limits<int64_t>::max());  // 0 = all
  vr.finish();

  const std::vector<std::string> train_docs = data::read_documents(spec.train);
  const std::vector<std::string> valid_docs = data::read_documents(spec.valid);
  manual_seed(sec.seed);  // initialisation and dropout draw from the default generator
  if (!spec.resuming()) {
    fs::create_directories(spec.dir);
    nlohmann::json& m = spec.config["model"];
    const nlohmann::json defaults{{"max_position_embeddings", max_len}};
    const models::BertConfig planned = check_model_section<models::BertConfig>(m, defaults, spec.where);
    QKV_CHECK(planned.type_vocab_size >= 2, spec.where,
              "field 'model.type_vocab_size': next-sentence prediction needs 2 segment types (sentence A and B), got ",
              m["type_vocab_size"].dump());
    check_fits_positions(max_len, "data.max_len", planned.max_position_embeddings, "max_position_embeddings",
                         spec.where);  // before the vocabulary is learned
    std::shared_ptr<text::Tokenizer> tok = make_bert_tokenizer(sec.tokenizer, spec.where, run.tokenizer_path, train_docs,
                                                          (fs::path(spec.dir) / "work").string());
    const auto cfg = new_model_config<models::BertConfig>(m, defaults, *tok, spec.where);
    fix_cosine_schedule(spec.config, topt, spec.where);
    bundle = io::make_bert(cfg, {true, true});
    bundle.tokenizer = tok;
    write_run_json(spec);
  }
  bundle.bert->train();
  bundle.mlm->train();
  bundle.nsp->train();
  check_fits_positions(max_len, "data.max_len", bundle.config.max_position_embeddings, "max_position_embeddings",
                       spec.where);
  const train::BertSpecials sp = specials_of(*bundle.tokenizer, bundle.config.vocab_size, spec.where);

  // The pairs are a function of the documents, the tokenizer and the seed (rebuilt alike on resume).
  train::MaskRng pair_rng(train::mix_seed(sec.seed, 0x5041495253ull));  // "PAIRS"
  // (errors name the file: "NSP needs at least two non-empty documents" said nothing of which)
  std::vector<train::NspPair> train_pairs = with_context(spec.train, [&] {
    return train::make_nsp_pairs(encode_segments(train_docs, *bundle.tokenizer), max_len, pair_rng, sp);
  });
  // Shuffled once (create_pretraining_data.py shuffles its instances), so batches mix documents.
  for (size_t i = train_pairs.size(); i > 1; --i) std::swap(train_pairs[i - 1], train_pairs[pair_rng.below(i)]);
  train::MaskRng valid_rng(train::mix_seed(sec.seed, 0x56414C4944ull));  // "VALID"
  std::vector<train::NspPair> valid_pairs = with_context(spec.valid, [&] {
    return train::make_nsp_pairs(encode_segments(valid_docs, *bundle.tokenizer), max_len, valid_rng, sp);
  });
  const size_t n_train_pairs = train_pairs.size();
  // Single-segment chunks always take a random B (as create_pretraining_data.py), so the labels
  // need not be balanced: the share of random pairs is NSP accuracy's majority baseline.
  auto random_share = [](const std::vector<train::NspPair>& ps) {
    size_t n = 0;
    for (const auto& p : ps) n += size_t(p.is_random);
    return ps.empty() ? 0.0 : double(n) / double(ps.size());
  };
  std::fprintf(stderr, "qkv train: NSP pairs with a random B: %.1f%% of training pairs, %.1f%% of held-out pairs\n",
               100 * random_share(train_pairs), 100 * random_share(valid_pairs));
  train::BertPretrainStream stream(std::move(train_pairs), batch, sp, sec.seed);
  train::BertPretrainStream valid_stream(std::move(valid_pairs), batch, sp, sec.seed);
  // All held-out batches, or k of them spread evenly (documents come grouped by source).
  const size_t n_valid = size_t(valid_stream.batches_per_epoch());
  const size_t k =  // not std::clamp: its bounds would cross when there are no batches
      valid_max_pairs > 0 ? std::min(n_valid, std::max<size_t>(1, size_t(valid_max_pairs / batch))) : n_valid;
  std::vector<train::BertBatch> valid_batches;
  int64_t valid_count = 0;
  for (size_t i = 0; i < k; ++i) {
    const size_t b = spread_index(i, n_valid, k);
    valid_batches.push_back(valid_stream.batch(b, train::mix_seed(sec.seed ^ 0x56ull, b)));
    valid_count += valid_batches.back().sequences;
  }
  auto model = std::make_shared<models::BertForPreTraining>(bundle.bert, bundle.mlm, bundle.nsp);
  std::fprintf(stderr, "qkv train: %zu training documents (%zu pairs of <= %lld tokens), %zu validation documents "
               "(%lld pairs scored), vocabulary %d, %lld parameters\n", train_docs.size(), n_train_pairs,
               (long long)max_len, valid_docs.size(), (long long)valid_count, bundle.tokenizer->vocab_size(),
               (long long)model->num_parameters());

  auto optimizer = make_optimizer(sec.optimizer, spec.where, *model);
  auto schedule = schedule_from_config(spec.config, spec.where);

  train::TrainCallbacks cb;
  cb.write_model = [&](const std::string& dir) { io::save_bert(dir, bundle); };
  cb.validate = [&]() {
    const train::BertEval e = train::BertPretrainTask::evaluate(*model, valid_batches);
    std::fprintf(stderr, "\nqkv train: valid MLM loss %.4f  MLM accuracy %.4f (%lld tokens)  NSP accuracy %.4f "
                 "(%lld pairs)\n", e.mlm_loss, e.mlm_accuracy, (long long)e.predicted, e.nsp_accuracy,
                 (long long)e.sequences);
    return std::map<std::string, double>{
        {"valid_mlm_loss", e.mlm_loss}, {"valid_mlm_acc", e.mlm_accuracy}, {"valid_nsp_acc", e.nsp_accuracy}};
  };
  cb.best_metric = "valid_mlm_loss";
  cb.lower_is_better = true;

  train::BertPretrainTask task(*model, stream);
  train::Trainer trainer(task, *optimizer, *schedule, topt, spec.dir, cb);
  BertRunResult result;
  result.outcome = resume_and_run(trainer, spec);
  result.steps = trainer.step();
  result.best_mlm_loss = trainer.best_score();
  result.model_dir = publish_model(spec.dir, topt.average_last);
  return result;
}

}  // namespace qkv::tasks
