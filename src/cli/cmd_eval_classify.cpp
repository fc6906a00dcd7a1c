// qkv eval-classify --model DIR --data FILE.tsv: labelled examples (label<TAB>text or
// label<TAB>a<TAB>b) -> accuracy and macro-F1 of the classifier against the gold labels
// (eval/classification.h), with per-label precision/recall/F1 under --per-label; --json for one
// JSON object.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "qkv/eval/classification.h"
#include "qkv/tasks/classifier.h"

namespace qkv::cli {
namespace {

int run_eval_classify(int argc, char** argv) {
  CLI::App app{"Score a classifier against gold labels (accuracy, macro-F1)", "qkv eval-classify"};
  std::string model_dir, data;
  bool json = false, per_label = false;
  tasks::ClassifyOptions opt;
  app.add_option("--model,-m", model_dir, "classifier directory (e.g. RUN/model)")->required();
  app.add_option("--data,-d", data, "labelled examples: label<TAB>text or label<TAB>a<TAB>b")->required();
  app.add_option("--batch-size", opt.batch_size, "inputs per batch")->check(positive());
  app.add_flag("--json", json, "print one JSON object");
  app.add_flag("--per-label", per_label, "also print each label's precision, recall, F1 and support");
  std::string precision = "fp32";
  add_precision_option(app, precision);
  QKV_PARSE(app, argc, argv);
  opt.precision = read_precision(precision, "qkv eval-classify");  // the score at bf16 / int8 before either is used
  const tasks::Classifier clf(model_dir, opt.precision);
  const tasks::LabelledSet set = tasks::read_labelled_tsv(data);
  QKV_CHECK(clf.accepts(set.pairs), data, "holds ", set.pairs ? "pairs" : "single texts", " but the model classifies ",
            clf.pairs() ? "pairs" : "single texts");
  std::map<std::string, int> id;
  for (size_t i = 0; i < clf.labels().size(); ++i) id[clf.labels()[i]] = int(i);
  // A gold label the model does not know is always wrong, and a class of its own (each one: merged
  // into one class, they counted once in the macro average instead of once each).
  const int known = int(clf.labels().size());
  std::vector<int> gold, pred;
  int n_unknown = 0;
  for (auto& g : set.gold) {
    gold.push_back(id.try_emplace(g, int(id.size())).first->second);  // a new label: the next id
    n_unknown += gold.back() >= known;
  }
  for (auto& r : clf.classify(set.inputs, opt)) pred.push_back(int(r.label_id));
  const auto rep = eval::classification_report(pred, gold, int(id.size()));
  if (json) {
    nlohmann::json j{{"examples", gold.size()}, {"accuracy", rep.accuracy}, {"macro_f1", rep.macro.f1},
                     {"macro_precision", rep.macro.precision}, {"macro_recall", rep.macro.recall},
                     {"unknown_gold_labels", n_unknown}};
    if (per_label) {
      nlohmann::json pl = nlohmann::json::object();
      for (size_t c = 0; c < clf.labels().size(); ++c)
        pl[clf.labels()[c]] = {{"precision", rep.per_class[c].precision}, {"recall", rep.per_class[c].recall},
                               {"f1", rep.per_class[c].f1}, {"support", rep.per_class[c].support}};
      j["per_label"] = pl;
    }
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("examples\t%zu\naccuracy\t%.4f\nmacro_f1\t%.4f\n", gold.size(), rep.accuracy, rep.macro.f1);
  if (n_unknown) std::printf("unknown_gold_labels\t%d\n", n_unknown);
  if (per_label)
    for (size_t c = 0; c < clf.labels().size(); ++c)
      std::printf("%s\tP %.4f\tR %.4f\tF1 %.4f\tsupport %lld\n", clf.labels()[c].c_str(), rep.per_class[c].precision,
                  rep.per_class[c].recall, rep.per_class[c].f1, (long long)rep.per_class[c].support);
  return 0;
}

Register register_eval_classify("eval-classify", "accuracy and macro-F1 of a classifier on labelled examples",
                                run_eval_classify);

}  // namespace
}  // namespace qkv::cli
