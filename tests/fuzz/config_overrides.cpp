// Fuzz target: `qkv train --config C --max-steps N --max-minutes M`: the flags written into the
// config (tasks::apply_run_flags, with no --precision, fp32 and bf16, for a new and a resumed run),
// its top-level sections and the train section read as every training run reads them. Input: 8
// bytes of max_steps, 8 of max_minutes, then config.json.
#include <cstring>

#include "fuzz_target.h"
#include "qkv/tasks/training_run.h"
#include "qkv/train/trainer.h"

QKV_FUZZ_TARGET(config_overrides) {
  int64_t max_steps = -1;
  double max_minutes = -1;
  if (size >= 16) {
    std::memcpy(&max_steps, data, 8);
    std::memcpy(&max_minutes, data + 8, 8);
    data += 16;
    size -= 16;
  }
  const std::string path = qkv::fuzz::scratch_file("run/config.json", data, size);
  for (const char* precision : {"", "fp32", "bf16"})
    for (bool resuming : {false, true})
      qkv::fuzz::expect_clean(path, [&] {
        qkv::tasks::RunDir spec;
        spec.config = qkv::tasks::read_json_file(path);
        spec.where = path;
        if (resuming) spec.checkpoint = "checkpoints/step-1";
        qkv::tasks::TrainingRun run;
        run.max_steps = max_steps;
        run.max_minutes = max_minutes;
        run.precision = precision;
        qkv::tasks::apply_run_flags(spec, run);
        qkv::tasks::RunSections sec = qkv::tasks::read_run_sections(spec.config, path, "transformer");
        qkv::ConfigReader tr(sec.train, path, "train");
        qkv::train::TrainOptions::from_config(tr);
        tr.finish();
      });
  return 0;
}
