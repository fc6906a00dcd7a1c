// qkv eval-tag --model DIR --data FILE.conll [--json]: tagged sentences (word<TAB>tag, a blank
// line between sentences; tasks/tag_data.h) -> token accuracy of the tagger against the gold
// tags, and for a chunk tag set (O, B-X, I-X, ...) entity-level precision, recall and F1
// (conlleval's chunking, eval/ner.h), with per-type figures under --per-type.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "qkv/eval/ner.h"
#include "qkv/tasks/tag_data.h"
#include "qkv/tasks/tagger.h"

namespace qkv::cli {
namespace {

int run_eval_tag(int argc, char** argv) {
  CLI::App app{"Score a tagger against gold tags (token accuracy, entity P/R/F1)", "qkv eval-tag"};
  std::string model_dir, data;
  bool json = false, per_type = false;
  tasks::TagOptions opt;
  app.add_option("--model,-m", model_dir, "token classifier directory (e.g. RUN/model)")->required();
  app.add_option("--data,-d", data, "tagged sentences: word<TAB>tag lines, a blank line between sentences")->required();
  app.add_option("--batch-size", opt.batch_size, "windows per batch")->check(positive());
  app.add_flag("--json", json, "print one JSON object");
  app.add_flag("--per-type", per_type, "also print each entity type's precision, recall, F1 and support");
  std::string precision = "fp32";
  add_precision_option(app, precision);
  QKV_PARSE(app, argc, argv);
  opt.precision = read_precision(precision, "qkv eval-tag");  // the score at bf16 / int8 before either is used
  const tasks::Tagger tagger(model_dir, opt.precision);
  const auto set = tasks::read_conll_file(data);
  std::vector<std::vector<std::string>> words, gold, pred;
  int64_t unknown = 0;  // gold tags the model does not know: always wrong
  const std::set<std::string> known(tagger.labels().begin(), tagger.labels().end());
  for (const auto& s : set) {
    words.push_back(s.words);
    gold.push_back(s.tags);
    for (const auto& t : s.tags) unknown += !known.count(t);
  }
  int64_t windows = 0;
  for (auto& r : tagger.tag(words, opt)) {
    windows += r.windows > 1;
    pred.push_back(std::move(r.tags));
  }
  const tasks::TagScores sc = tasks::score_tags(pred, gold);
  eval::NerScores ner;
  if (sc.chunked && per_type) ner = eval::ner_scores(pred, gold);
  if (json) {
    nlohmann::json j{{"sentences", set.size()}, {"words", sc.words}, {"accuracy", sc.accuracy},
                     {"unknown_gold_tags", unknown}, {"sentences_in_windows", windows}};
    if (sc.chunked) {
      j["precision"] = sc.precision;
      j["recall"] = sc.recall;
      j["f1"] = sc.f1;
      j["entities_gold"] = sc.n_gold;
      j["entities_predicted"] = sc.n_pred;
      j["entities_correct"] = sc.n_correct;
      if (per_type) {
        nlohmann::json pt = nlohmann::json::object();
        for (auto& [type, s] : ner.per_type)
          pt[type] = {{"precision", s.precision}, {"recall", s.recall}, {"f1", s.f1}, {"support", s.support}};
        j["per_type"] = pt;
      }
    }
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("sentences\t%zu\nwords\t%lld\naccuracy\t%.4f\n", set.size(), (long long)sc.words, sc.accuracy);
  if (sc.chunked)
    std::printf("precision\t%.4f\nrecall\t%.4f\nf1\t%.4f\nentities\t%lld gold, %lld predicted, %lld correct\n",
                sc.precision, sc.recall, sc.f1, (long long)sc.n_gold, (long long)sc.n_pred, (long long)sc.n_correct);
  if (unknown) std::printf("unknown_gold_tags\t%lld\n", (long long)unknown);
  if (windows) std::printf("sentences_in_windows\t%lld\n", (long long)windows);
  if (per_type)
    for (auto& [type, s] : ner.per_type)
      std::printf("%s\tP %.4f\tR %.4f\tF1 %.4f\tsupport %lld\n", type.c_str(), s.precision, s.recall, s.f1,
                  (long long)s.support);
  return 0;
}

Register register_eval_tag("eval-tag", "token accuracy and entity P/R/F1 of a BERT tagger on tagged sentences",
                           run_eval_tag);

}  // namespace
}  // namespace qkv::cli
