// src/cli/train_classifier.h - `qkv train` for "model_type": "gpt_classifier" (tasks/cls_training.h).
#pragma once
#include "qkv/tasks/translation_training.h"

namespace qkv::cli {

// If the run's config (--config, or run.json of --resume) has model_type "gpt_classifier", runs
// it and returns the exit code; otherwise returns -1 and does nothing.
int train_classifier_if_requested(const tasks::TranslationRun& flags);

}  // namespace qkv::cli
