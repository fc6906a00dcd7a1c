#include "train_classifier.h"

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "qkv/tasks/cls_training.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace qkv::cli {

int train_classifier_if_requested(const tasks::TranslationRun& f) {
  std::string path = f.config_path;
  if (!f.resume.empty()) path = (fs::path(f.resume) / "run.json").string();
  if (path.empty() || !fs::exists(path)) return -1;  // train_translation reports what is missing
  nlohmann::json j = nlohmann::json::parse(read_file(path), nullptr, /*allow_exceptions=*/false);
  if (!f.resume.empty() && j.is_object() && j.contains("config")) j = j["config"];
  if (!j.is_object() || j.value("model_type", "") != "gpt_classifier") return -1;

  QKV_CHECK(f.tokenizer_path.empty(), "qkv train", "--tokenizer is not used by gpt_classifier runs: the tokenizer "
            "comes from init_from, or is learned per the config's tokenizer section");
  tasks::ClassifierRun r;
  r.config_path = f.config_path;
  r.out_dir = f.out_dir;
  r.resume = f.resume;
  r.corpus = f.corpus;
  r.train_tsv = f.train_tsv;
  r.valid_tsv = f.valid_tsv;
  r.data_dir = f.data_dir;
  r.max_steps = f.max_steps;
  r.max_minutes = f.max_minutes;
  const tasks::ClassifierRunResult res = tasks::train_gpt_classifier(r);
  const char* why = res.outcome == train::Outcome::interrupted   ? "interrupted (checkpoint saved)"
                    : res.outcome == train::Outcome::early_stopped ? "early-stopped"
                                                                   : "finished";
  std::fprintf(stderr, "qkv train: %s at step %lld; best validation accuracy %.4f; model in %s\n", why,
               (long long)res.steps, res.best_accuracy, res.model_dir.c_str());
  return res.outcome == train::Outcome::interrupted ? 130 : 0;
}

}  // namespace qkv::cli
