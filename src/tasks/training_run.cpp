// The run-directory handling shared by tasks::train_translation and tasks::train_lm.
#include "qkv/tasks/training_run.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "qkv/data/corpus_mono.h"
#include "qkv/train/checkpoint.h"
#include "qkv/train/distributed.h"
#include "qkv/util/config.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace qkv::tasks {

std::shared_ptr<text::Tokenizer> given_tokenizer(ConfigReader& r, const std::string& flag_path,
                                                 std::initializer_list<const char*> learning_keys) {
  std::string path = r.has("path") ? r.string("path") : "";
  const std::string source = flag_path.empty() ? r.where("path") : "--tokenizer " + flag_path;
  if (!flag_path.empty()) path = flag_path;
  if (path.empty()) return nullptr;
  std::string unused;
  for (const char* key : learning_keys)
    if (r.has(key)) {
      r.raw(key);
      unused += std::string(unused.empty() ? "" : ", ") + "tokenizer." + key;
    }
  if (!unused.empty())
    std::fprintf(stderr, "qkv train: warning: %s not used: the tokenizer comes from %s\n", unused.c_str(),
                 source.c_str());
  r.finish();
  return text::load_tokenizer(path);
}

void check_fits_positions(int64_t length, const char* field, int64_t positions, const char* table,
                          const std::string& where) {
  QKV_CHECK(length <= positions, where, "field '", field, "': ", length, " is longer than model.", table, " ",
            positions);
}

void check_resumed_field(const RunDir& spec, const std::string& field, const nlohmann::json& run_value,
                         const nlohmann::json& checkpoint_value, const std::string& checkpoint_file) {
  auto differs = [&](const std::string& name, const nlohmann::json& a, const nlohmann::json& b) {
    fail(spec.where, "field '", name, "' is ", a.dump(), " but the checkpoint's (", checkpoint_file, ") is ", b.dump(),
         ": a resumed run continues the model it started (start a new run for another)");
  };
  if (run_value == checkpoint_value) return;
  if (!run_value.is_object() || !checkpoint_value.is_object()) differs(field, run_value, checkpoint_value);
  const nlohmann::json none;
  for (const auto& [k, v] : run_value.items())
    if (!checkpoint_value.contains(k) || checkpoint_value[k] != v)
      differs(field + "." + k, v, checkpoint_value.contains(k) ? checkpoint_value[k] : none);
  for (const auto& [k, v] : checkpoint_value.items())
    if (!run_value.contains(k)) differs(field + "." + k, none, v);
}

nlohmann::json read_json_file(const std::string& path) {
  try {
    return nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail(path, "not valid JSON: ", e.what());
  }
}

namespace {

// A run directory's run.json: {"config": {...}, "train": FILE, "valid": FILE, ...}.
nlohmann::json read_run_json(const std::string& run_json) {
  nlohmann::json rj = read_json_file(run_json);
  QKV_CHECK(rj.is_object() && rj.contains("config") && rj["config"].is_object(), run_json,
            "expected an object whose field 'config' is the run's config object");
  for (const char* key : {"train", "valid"})
    QKV_CHECK(rj.contains(key) && rj[key].is_string(), run_json, "field '", key, "': expected a file name (a string)");
  return rj;
}

}  // namespace

RunDir open_run_dir(const std::string& config_path, const std::string& out_dir, const std::string& resume) {
  RunDir r;
  if (!resume.empty()) {
    r.dir = resume;
    std::string run_json = (fs::path(resume) / "run.json").string();
    QKV_CHECK(fs::exists(run_json), resume, "not a run directory (no run.json); start a run with --config");
    nlohmann::json rj = read_run_json(run_json);
    r.config = rj.at("config");
    r.train = rj.at("train").get<std::string>();
    r.valid = rj.at("valid").get<std::string>();
    auto latest = train::CheckpointManager::latest(resume);
    QKV_CHECK(latest.has_value(), resume, "no checkpoint to resume from under checkpoints/ (the run stopped before "
              "its first save: delete the directory and start the run again)");
    r.checkpoint = *latest;
    r.where = resume + "/run.json";
    return r;
  }
  QKV_CHECK(!config_path.empty(), "train", "give --config (or --resume RUN)");
  QKV_CHECK(!out_dir.empty(), "train", "give --out RUN_DIR");
  if (fs::exists(fs::path(out_dir) / "run.json"))
    fail(out_dir, train::CheckpointManager::latest(out_dir).has_value()
                      ? "already holds a run; use --resume to continue it or choose another --out"
                      : "holds a run that stopped before its first save (nothing to resume): delete it, or choose "
                        "another --out");
  r.dir = out_dir;
  r.config = read_json_file(config_path);
  r.where = config_path;
  return r;
}

namespace {
// Flags are written only into an object with an object (or no) "train" section: a config of any
// other shape is left as it is, for read_run_sections to refuse naming the file and field (found
// by fuzzing: a number for "train" made nlohmann::json throw its own type_error here).
bool train_section_writable(const nlohmann::json& config) {
  return config.is_object() && (!config.contains("train") || config["train"].is_object());
}
}  // namespace

void override_limits(nlohmann::json& config, int64_t max_steps, double max_minutes) {
  if (!train_section_writable(config)) return;
  if (max_steps >= 0) config["train"]["max_steps"] = max_steps;
  if (max_minutes >= 0) config["train"]["max_minutes"] = max_minutes;
}

void apply_run_flags(RunDir& spec, const TrainingRun& run) {
  override_limits(spec.config, run.max_steps, run.max_minutes);
  if (run.precision.empty()) return;
  QKV_CHECK(run.precision == "fp32" || run.precision == "bf16", "train",
            "--precision: expected fp32 or bf16, got \"", run.precision, "\"");
  nlohmann::json& config = spec.config;
  if (!train_section_writable(config)) return;
  if (spec.resuming()) {
    const nlohmann::json& tr = config.contains("train") ? config["train"] : nlohmann::json::object();
    const std::string started = tr.contains("precision") && tr["precision"].is_string()
                                    ? tr["precision"].get<std::string>() : "fp32";
    QKV_CHECK(started == run.precision, spec.where, "field 'train.precision': the run started in ", started,
              "; --resume continues in it (--precision ", run.precision, " would change it)");
    return;
  }
  config["train"]["precision"] = run.precision;
}

RunSections read_run_sections(nlohmann::json& config, const std::string& where,
                              const std::string& default_model_type) {
  ConfigReader top(config, where);
  RunSections s;
  s.model_type = top.string("model_type", default_model_type);
  top.object("model");
  s.tokenizer = top.object("tokenizer", false);
  s.data = top.object("data", false);
  s.optimizer = top.object("optimizer", false);
  s.schedule = top.object("schedule", false);
  s.train = top.object("train", false);
  s.valid = top.object("valid", false);
  s.seed = uint64_t(top.integer("seed", 1));
  top.finish();
  config["model_type"] = s.model_type;
  return s;
}

void write_run_json(const RunDir& run) {
  write_file_atomic((fs::path(run.dir) / "run.json").string(),
                    nlohmann::json{{"config", run.config}, {"train", run.train}, {"valid", run.valid}}.dump(2) + "\n");
}

void fix_cosine_schedule(nlohmann::json& config, const train::TrainOptions& topt, const std::string& where) {
  nlohmann::json& sc = config["schedule"];
  if (!sc.contains("type")) sc["type"] = "warmup_cosine";
  if (sc["type"] == "warmup_cosine" && !sc.contains("total")) {
    QKV_CHECK(topt.max_steps > 0, where, "field 'schedule.total': warmup_cosine needs it when train.max_steps is 0");
    sc["total"] = topt.max_steps;
  }
}

void check_schedule_early(nlohmann::json config, const train::TrainOptions& topt, const std::string& where) {
  fix_cosine_schedule(config, topt, where);
  schedule_from_config(config, where);
}

std::unique_ptr<LrSchedule> schedule_from_config(const nlohmann::json& config, const std::string& where) {
  try {
    return make_schedule(config.contains("schedule") ? config["schedule"] : nlohmann::json::object());
  } catch (const Error& e) {
    fail(where, "section 'schedule': ", e.what());
  }
}

train::Outcome resume_and_run(train::Trainer& trainer, const RunDir& spec) {
  if (spec.resuming()) {
    trainer.restore_training_state(spec.checkpoint);
    std::fprintf(stderr, "qkv train: resumed from %s at step %lld\n", spec.checkpoint.c_str(), (long long)trainer.step());
  }
  return trainer.run();
}

std::string publish_model(const std::string& run_dir, int average_last) {
  // Data-parallel: rank 0 alone writes the run directory (the other ranks' run_dir is scratch).
  if (!train::Communicator::world().is_main()) return (fs::path(run_dir) / "model").string();
  if (average_last > 0) {
    // A run stopped early (SIGTERM, max_minutes) may have fewer: average what there is.
    const int have = int(train::CheckpointManager::list(run_dir).size());
    const int n = std::min(average_last, have);
    const std::string model = (fs::path(run_dir) / "model").string();
    auto dirs = train::last_checkpoints(run_dir, n);
    train::average_checkpoints(dirs, model);
    std::fprintf(stderr, "qkv train: %s is the average of the last %d checkpoints (%s .. %s)%s\n", model.c_str(), n,
                 fs::path(dirs.front()).filename().c_str(), fs::path(dirs.back()).filename().c_str(),
                 n < average_last ? " (average_last asked for more than the run saved)" : "");
    return model;
  }
  auto best = train::CheckpointManager::best(run_dir);
  std::string publish = best ? *best : *train::CheckpointManager::latest(run_dir);
  const std::string model = (fs::path(run_dir) / "model").string();
  train::copy_directory_atomic(publish, model, {"training_state.safetensors"});
  return model;
}

std::string run_model_type(const std::string& config_path, const std::string& resume) {
  nlohmann::json config;
  std::string where;
  if (!resume.empty()) {
    where = (fs::path(resume) / "run.json").string();
    QKV_CHECK(fs::exists(where), resume, "not a run directory (no run.json); start a run with --config");
    config = read_run_json(where).at("config");
  } else {
    QKV_CHECK(!config_path.empty(), "train", "give --config (or --resume RUN)");
    config = read_json_file(config_path);
    where = config_path;
  }
  QKV_CHECK(config.is_object(), where, "expected a JSON object");
  if (!config.contains("model_type")) return "transformer";
  QKV_CHECK(config["model_type"].is_string(), where, "field 'model_type': expected a string");
  return config["model_type"].get<std::string>();
}

void resolve_data_files(const TrainingRun& run, RunDir& spec, const CorpusFiles& corpus, const std::string& usage) {
  if (!run.corpus.empty()) {
    const std::string dir = corpus.build(run.corpus, run.data_dir);
    spec.train = (fs::path(dir) / corpus.train).string();
    spec.valid = (fs::path(dir) / corpus.valid).string();
  }
  if (!run.train_file.empty()) spec.train = run.train_file;
  if (!run.valid_file.empty()) spec.valid = run.valid_file;
  QKV_CHECK(!spec.train.empty() && !spec.valid.empty(), "train", usage);
  spec.train = fs::absolute(spec.train).string();
  spec.valid = fs::absolute(spec.valid).string();
}

void resolve_document_files(const TrainingRun& run, RunDir& spec) {
  auto build_lm_en = [](const std::string& name, const std::string& data_dir) {
    QKV_CHECK(name == "lm-en", "train", "unknown document corpus '", name,
              "' (expected lm-en, or --train FILE --valid FILE)");
    data::ExtraBuildOptions o;
    o.data_dir = data_dir;
    o.verbose = true;
    return data::build_lm_corpus(o).out_dir;
  };
  resolve_data_files(run, spec, {build_lm_en, "train.txt", "valid.txt"}, "give --corpus lm-en or both --train and --valid");
}

}  // namespace qkv::tasks
