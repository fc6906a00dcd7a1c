// qkv/train/progress.h - what training shows while it runs.
// On a terminal: one redrawn progress line (step, epoch, loss, lr, tokens/s, elapsed, ETA).
// Otherwise (a log file, CI): a plain line every `log_every` updates, never carriage returns.
// MetricsLog appends JSON-lines records (one object per line) for `qkv plot`.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>

namespace qkv::train {

struct ProgressInfo {
  int64_t step = 0, total_steps = 0;  // total 0 = unknown (no ETA)
  int64_t epoch = 0;
  double loss = 0, lr = 0, tokens_per_s = 0;  // tokens_per_s: units per second
  const char* unit = "tok";                   // what the rate counts (tok, seq, ...)
};

class ProgressBar {
 public:
  explicit ProgressBar(std::FILE* out = stderr, int64_t log_every = 50, bool force_plain = false);
  void update(const ProgressInfo& p);
  void message(const std::string& line);  // prints a line without breaking the bar
  void finish();
  bool is_terminal() const { return tty_; }
  static std::string format_duration(double seconds);  // "1h02m", "3m07s", "12s"

 private:
  std::FILE* out_;
  int64_t log_every_;
  bool tty_;
  bool bar_shown_ = false;
  int64_t updates_ = 0;
  std::chrono::steady_clock::time_point start_;
};

class MetricsLog {
 public:
  // Appends to path, creating it. A resumed run gives keep_through_step, the step it restored:
  // the lines of later steps (an earlier process's, past its last checkpoint) and a torn last line
  // are dropped first (the file rewritten atomically), so that each step's lines appear once.
  explicit MetricsLog(const std::string& path, int64_t keep_through_step = -1);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  void write(const std::map<std::string, double>& values, const std::string& kind);  // flushes
 private:
  std::string path_;
  std::FILE* f_;
};

// SIGINT / SIGTERM set a flag the training loop polls (it saves a checkpoint and exits cleanly).
void install_stop_signal_handlers();
bool stop_requested();
void reset_stop_request();

}  // namespace qkv::train
