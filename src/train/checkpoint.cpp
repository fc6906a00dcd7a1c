#include "qkv/train/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "qkv/io/format/safetensors.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace qkv::train {

fs::path directory_target(const std::string& dir, const std::string& flag) {
  // "out/" names "out": its filename() is empty, and the temporary went inside the target, which
  // the rename then moved into itself (EINVAL), leaving the temporary behind.
  fs::path target = fs::path(dir).lexically_normal();
  if (!target.has_filename()) target = target.parent_path();
  const std::string name = target.filename().string();
  QKV_CHECK(!name.empty() && name != "." && name != "..", dir, flag.empty() ? "" : flag + ": ",
            "name a directory, not '", dir, "'");
  return target;
}

void write_directory_atomic(const std::string& dir, const std::function<void(const std::string&)>& fill) {
  const fs::path target = directory_target(dir);
  fs::path tmp = target.parent_path() / (target.filename().string() + ".tmp." + std::to_string(::getpid()));
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  fs::remove_all(tmp, ec);
  QKV_CHECK(fs::create_directories(tmp, ec) || fs::is_directory(tmp), tmp.string(), "cannot create directory: ",
            ec.message());
  try {
    fill(tmp.string());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  // Replace: move an existing target aside first, so the new one appears in one rename.
  fs::path old = target.parent_path() / (target.filename().string() + ".old." + std::to_string(::getpid()));
  bool had_old = fs::exists(target);
  // A failure here leaves what was there before and nothing of ours (the temporary, a whole
  // model, was left behind).
  if (had_old) {
    fs::rename(target, old, ec);
    if (ec) {
      const std::string why = ec.message();
      fs::remove_all(tmp, ec);
      fail(dir, "cannot move the previous directory aside: ", why);
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    const std::string why = ec.message();
    if (had_old) fs::rename(old, target, ec);
    fs::remove_all(tmp, ec);
    fail(dir, "cannot publish checkpoint directory: ", why);
  }
  if (had_old) fs::remove_all(old, ec);
  // The rename itself is durable once the parent directory is synced (a SIGKILL needs no sync;
  // a power cut does).
  const int dfd = ::open(target.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

namespace {

// The pid in a temporary's name "<name>.tmp.<pid>" / "<name>.old.<pid>" (0 if it has none).
pid_t temporary_owner(const std::string& name, const std::string& tag, std::string& base) {
  const size_t at = name.rfind(tag);
  if (at == std::string::npos || at == 0 || at + tag.size() == name.size()) return 0;
  const std::string digits = name.substr(at + tag.size());
  if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) return 0;
  base = name.substr(0, at);
  return pid_t(std::stol(digits));
}

bool process_alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

}  // namespace

void remove_stale_temporaries(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  std::vector<fs::path> entries;
  for (auto& e : fs::directory_iterator(dir, ec)) entries.push_back(e.path());
  for (const fs::path& p : entries) {
    const std::string name = p.filename().string();
    std::string base;
    const pid_t tmp = temporary_owner(name, ".tmp.", base), del = temporary_owner(name, ".del.", base);
    if ((tmp > 0 && !process_alive(tmp)) || (del > 0 && !process_alive(del))) {
      fs::remove_all(p, ec);  // a write that never finished (its target was never replaced), a deletion
    } else if (pid_t old = temporary_owner(name, ".old.", base); old > 0 && !process_alive(old)) {
      // Killed between moving the previous directory aside and renaming the new one in: the
      // previous one is complete, so it goes back unless the new one made it.
      if (!fs::exists(p.parent_path() / base, ec)) fs::rename(p, p.parent_path() / base, ec);
      else fs::remove_all(p, ec);
    }
  }
}

CheckpointManager::CheckpointManager(std::string run_dir, int keep_last)
    : run_dir_(std::move(run_dir)), keep_last_(keep_last) {
  QKV_CHECK(keep_last_ >= 1, "checkpoints", "keep_last must be >= 1, got ", keep_last_);
  fs::create_directories(fs::path(run_dir_) / "checkpoints");
  remove_stale_temporaries(run_dir_);
  remove_stale_temporaries((fs::path(run_dir_) / "checkpoints").string());
}

std::vector<std::string> CheckpointManager::list(const std::string& run_dir) {
  std::vector<std::string> out;
  fs::path root = fs::path(run_dir) / "checkpoints";
  if (!fs::exists(root)) return out;
  for (auto& e : fs::directory_iterator(root)) {
    std::string name = e.path().filename().string();
    // "step-" and digits only: not a temporary (.tmp.), a directory moved aside (.old.) or one
    // being deleted (.del.)
    if (e.is_directory() && name.size() > 5 && name.rfind("step-", 0) == 0 &&
        name.find_first_not_of("0123456789", 5) == std::string::npos)
      out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());  // zero-padded step numbers sort by step
  return out;
}

std::optional<std::string> CheckpointManager::latest(const std::string& run_dir) {
  auto l = list(run_dir);
  if (l.empty()) return std::nullopt;
  return l.back();
}

std::optional<std::string> CheckpointManager::best(const std::string& run_dir) {
  fs::path link = fs::path(run_dir) / "best";
  std::error_code ec;
  if (!fs::is_symlink(link, ec)) return std::nullopt;
  fs::path target = fs::read_symlink(link, ec);
  fs::path full = target.is_absolute() ? target : fs::path(run_dir) / target;
  if (!fs::is_directory(full)) return std::nullopt;
  return full.lexically_normal().string();
}

std::string CheckpointManager::save(int64_t step, const std::function<void(const std::string&)>& fill) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%09lld", static_cast<long long>(step));
  std::string dir = (fs::path(run_dir_) / "checkpoints" / name).string();
  try {
    write_directory_atomic(dir, fill);
  } catch (const Error& e) {  // e.g. a full disk: say what survived and what to do
    if (list(run_dir_).empty())
      fail(dir, "checkpoint not saved: ", e.what(), ". The run saved no checkpoint before this one, so there is "
           "nothing to resume: free space and start it again");
    fail(dir, "checkpoint not saved: ", e.what(), ". The checkpoints already in ", run_dir_,
         "/checkpoints are untouched; free space and continue with qkv train --resume ", run_dir_);
  }
  // The newest keep_last stay, and the best besides them (it does not take one of their places:
  // an old best counted among them deleted each new checkpoint as soon as it was written).
  auto all = list(run_dir_);
  auto b = best(run_dir_);
  for (int64_t i = 0; i < int64_t(all.size()) - keep_last_; ++i) {
    if (b && fs::equivalent(all[size_t(i)], *b)) continue;
    // Renamed first, so that a kill during the deletion never leaves a partial checkpoint under
    // a name list() returns; remove_stale_temporaries() finishes the job.
    const std::string doomed = all[size_t(i)] + ".del." + std::to_string(::getpid());
    fs::rename(all[size_t(i)], doomed);
    fs::remove_all(doomed);
  }
  return dir;
}

void CheckpointManager::mark_best(const std::string& dir) {
  fs::path link = fs::path(run_dir_) / "best";
  fs::path tmp = fs::path(run_dir_) / ("best.tmp." + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_directory_symlink(fs::relative(dir, run_dir_), tmp);
  fs::rename(tmp, link);  // atomic replacement of the symlink
}

void copy_directory_atomic(const std::string& src, const std::string& dst, const std::vector<std::string>& skip) {
  write_directory_atomic(dst, [&](const std::string& tmp) {
    for (auto& e : fs::directory_iterator(src)) {
      const std::string name = e.path().filename().string();
      if (!e.is_regular_file() || std::find(skip.begin(), skip.end(), name) != skip.end()) continue;
      write_file_atomic((fs::path(tmp) / e.path().filename()).string(), read_file(e.path().string()));
    }
  });
}

std::vector<std::string> last_checkpoints(const std::string& run_dir, int n) {
  auto all = CheckpointManager::list(run_dir);
  QKV_CHECK(n >= 1 && int64_t(all.size()) >= n, (fs::path(run_dir) / "checkpoints").string(), "expected at least ", n,
            " checkpoints to average, found ", all.size());
  return std::vector<std::string>(all.end() - n, all.end());
}

namespace {

// The files of a checkpoint that the average copies (config, tokenizer, labels, ...): every regular
// file but the weights and the training state, by name.
std::vector<std::string> copied_files(const std::string& dir) {
  std::vector<std::string> names;
  for (auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name != "model.safetensors" && name != "training_state.safetensors")
      names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

void average_checkpoints(const std::vector<std::string>& dirs, const std::string& out_dir) {
  QKV_CHECK(!dirs.empty(), "average_checkpoints", "expected at least one checkpoint directory");
  auto model_file = [](const std::string& d) { return (fs::path(d) / "model.safetensors").string(); };
  // Every checkpoint holds the same files besides its weights, byte for byte: weights averaged
  // under one tokenizer and published with another's (only config.json was compared) read
  // every token as some other one.
  const std::vector<std::string> names = copied_files(dirs.back());
  for (const std::string& dir : dirs) {
    if (dir == dirs.back()) continue;
    const std::vector<std::string> here = copied_files(dir);
    for (const std::string& name : names) {
      const std::string file = (fs::path(dir) / name).string(), last = (fs::path(dirs.back()) / name).string();
      QKV_CHECK(std::binary_search(here.begin(), here.end(), name), dir, "has no ", name, " but ", dirs.back(),
                " has: only checkpoints of one model can be averaged");
      QKV_CHECK(read_file(file) == read_file(last), file, "differs from ", last,
                ": only checkpoints of one model can be averaged");
    }
    for (const std::string& name : here)
      QKV_CHECK(std::binary_search(names.begin(), names.end(), name), (fs::path(dir) / name).string(),
                "is not in ", dirs.back(), ": only checkpoints of one model can be averaged");
  }
  safetensors::Contents first = safetensors::load(model_file(dirs.front()));
  std::map<std::string, std::vector<double>> sums;  // name -> element sums, floating tensors only
  auto add = [&](const safetensors::Contents& c, const std::string& dir) {
    const std::string file = model_file(dir);
    QKV_CHECK(c.tensors.size() == first.tensors.size(), file, "has ", c.tensors.size(), " tensors, ",
              model_file(dirs.front()), " has ", first.tensors.size());
    for (const auto& [name, t] : c.tensors) {
      auto it = first.tensors.find(name);
      QKV_CHECK(it != first.tensors.end(), file, "tensor '", name, "' is not in ", model_file(dirs.front()));
      const Tensor& f = it->second;
      QKV_CHECK(t.shape() == f.shape() && t.dtype() == f.dtype(), file, "tensor '", name, "': expected ", f.str(),
                " as in ", model_file(dirs.front()), ", got ", t.str());
      if (t.dtype() == DType::f32 || t.dtype() == DType::f64) {
        std::vector<double> v = t.to_vector<double>();
        auto& s = sums[name];
        if (s.empty()) s.assign(v.size(), 0.0);
        for (size_t i = 0; i < v.size(); ++i) s[i] += v[i];
      } else {
        Tensor a = t.contiguous(), b = f.contiguous();
        QKV_CHECK(std::equal(static_cast<const char*>(a.raw_data()),
                             static_cast<const char*>(a.raw_data()) + a.numel() * int64_t(dtype_size(a.dtype())),
                             static_cast<const char*>(b.raw_data())),
                  file, "tensor '", name, "' (", t.str(),
                  ") is not floating and differs between checkpoints; it cannot be averaged");
      }
    }
  };
  add(first, dirs.front());
  for (size_t i = 1; i < dirs.size(); ++i) add(safetensors::load(model_file(dirs[i])), dirs[i]);
  std::map<std::string, Tensor> out;
  const double n = double(dirs.size());
  for (const auto& [name, t] : first.tensors) {
    auto it = sums.find(name);
    if (it == sums.end()) {
      out[name] = t;
      continue;
    }
    std::vector<double> mean(it->second.size());
    for (size_t i = 0; i < mean.size(); ++i) mean[i] = it->second[i] / n;
    out[name] = Tensor::from_vector<double>(mean, t.shape()).to(t.dtype());
  }
  write_directory_atomic(out_dir, [&](const std::string& tmp) {
    for (const std::string& name : names)
      write_file_atomic((fs::path(tmp) / name).string(), read_file((fs::path(dirs.back()) / name).string()));
    safetensors::save(model_file(tmp), out, first.metadata);
  });
}

}  // namespace qkv::train
