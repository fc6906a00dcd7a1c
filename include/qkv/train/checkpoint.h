// qkv/train/checkpoint.h - checkpoint directories.
//
// A checkpoint is a model directory (config.json, model.safetensors, tokenizer files) plus
// training_state.safetensors (optimizer moments, step, RNG state, data position). Every file is
// written atomically (temporary, fsync, rename), and a directory is published by renaming a
// complete temporary directory, so a crash never leaves a half-written checkpoint under a
// final name.
//
// Layout under a run directory:
//   run/checkpoints/step-000500/   run/checkpoints/step-001000/ ...  (the last N kept)
//   run/best -> checkpoints/step-...  (a symlink to the best by validation BLEU, kept out of pruning)
//   run/model/                       (a copy of the final or best model, for `qkv translate`)
#pragma once
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "qkv/tensor/tensor.h"

namespace qkv::train {

// The directory `dir` names, as write_directory_atomic publishes it: "out/" is "out". "." and ".."
// name none to rename into place (replacing the working directory failed with EBUSY and left the
// temporary behind): an error naming `dir` (and `flag`, the option that gave it, when not empty).
std::filesystem::path directory_target(const std::string& dir, const std::string& flag = "");
// Writes a directory atomically: fill(tmp_dir) creates the files, then tmp_dir is renamed to
// `dir` (replacing an older `dir`; directory_target says which).
void write_directory_atomic(const std::string& dir, const std::function<void(const std::string& tmp_dir)>& fill);

// Removes what writers killed mid-write left in `dir`: "<name>.tmp.<pid>" temporaries,
// "<name>.del.<pid>" pruned checkpoints half deleted, and "<name>.old.<pid>" directories moved
// aside (put back if "<name>" is missing), but only those whose process is gone, so a concurrent
// writer's are never touched.
void remove_stale_temporaries(const std::string& dir);

class CheckpointManager {
 public:
  // Creates run_dir/checkpoints and clears stale temporaries there and in run_dir.
  CheckpointManager(std::string run_dir, int keep_last);
  // Saves step `step` via fill(dir); prunes to the newest keep_last and the best. A failed write
  // (full disk) throws naming the checkpoint; the ones already saved are untouched.
  std::string save(int64_t step, const std::function<void(const std::string& dir)>& fill);
  // Marks `dir` as best (updates run/best symlink).
  void mark_best(const std::string& dir);
  const std::string& run_dir() const { return run_dir_; }

  // Reading a run directory needs no manager (e.g. `qkv train --resume`):
  static std::vector<std::string> list(const std::string& run_dir);      // oldest first
  static std::optional<std::string> latest(const std::string& run_dir);  // newest
  static std::optional<std::string> best(const std::string& run_dir);    // run/best's target

 private:
  std::string run_dir_;
  int keep_last_;
};

// Copies a directory's regular files into `dst` atomically (used to publish run/model), except the
// files named in `skip` (never written: publishing a model needs no room for its training state).
void copy_directory_atomic(const std::string& src, const std::string& dst, const std::vector<std::string>& skip = {});

// The `n` newest checkpoints of a run, oldest first; an error if the run has fewer.
std::vector<std::string> last_checkpoints(const std::string& run_dir, int n);

// Checkpoint averaging (Vaswani et al. 2017, 6.1: "averaging the last 5 checkpoints"; fairseq's
// average_checkpoints.py, Marian's --average): `out_dir` gets model.safetensors whose every f32/f64
// tensor is the element-wise mean of the same tensor in `dirs` (summed in double in the order
// given, rounded once), and the other model files (config.json, tokenizers) of the last
// directory; training_state.safetensors is not copied. Every directory must have the same
// config.json and the same tensor names, shapes and dtypes; an integer tensor must be equal in all.
void average_checkpoints(const std::vector<std::string>& dirs, const std::string& out_dir);

}  // namespace qkv::train
