#include "qkv/train/progress.h"

#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "qkv/util/error.h"
#include "qkv/util/file.h"

namespace qkv::train {

ProgressBar::ProgressBar(std::FILE* out, int64_t log_every, bool force_plain)
    : out_(out), log_every_(log_every < 1 ? 1 : log_every), start_(std::chrono::steady_clock::now()) {
  tty_ = !force_plain && ::isatty(::fileno(out_));
}

std::string ProgressBar::format_duration(double s) {
  if (!(s >= 0) || s > 1e8) return "?";
  int64_t t = int64_t(s + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%lldh%02lldm", (long long)(t / 3600), (long long)(t % 3600 / 60));
  else if (t >= 60) std::snprintf(buf, sizeof buf, "%lldm%02llds", (long long)(t / 60), (long long)(t % 60));
  else std::snprintf(buf, sizeof buf, "%llds", (long long)t);
  return buf;
}

void ProgressBar::update(const ProgressInfo& p) {
  ++updates_;
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string eta = "?";
  if (p.total_steps > 0 && p.step > 0) eta = format_duration(elapsed / double(p.step) * double(p.total_steps - p.step));
  char stats[256];
  std::snprintf(stats, sizeof stats, "step %lld%s epoch %lld  loss %.4f  lr %.2e  %.0f %s/s  %s elapsed  ETA %s",
                (long long)p.step, p.total_steps > 0 ? ("/" + std::to_string(p.total_steps)).c_str() : "",
                (long long)p.epoch, p.loss, p.lr, p.tokens_per_s, p.unit, format_duration(elapsed).c_str(), eta.c_str());
  if (tty_) {
    std::string bar;
    if (p.total_steps > 0) {
      int width = 24, filled = int(double(width) * double(p.step) / double(p.total_steps));
      if (filled > width) filled = width;
      bar = "[" + std::string(size_t(filled), '#') + std::string(size_t(width - filled), '.') + "] ";
    }
    std::fprintf(out_, "\r\033[K%s%s", bar.c_str(), stats);
    std::fflush(out_);
    bar_shown_ = true;
  } else if (updates_ % log_every_ == 0 || p.step == p.total_steps) {
    std::fprintf(out_, "%s\n", stats);
    std::fflush(out_);
  }
}

void ProgressBar::message(const std::string& line) {
  if (tty_ && bar_shown_) std::fprintf(out_, "\r\033[K");
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
  bar_shown_ = false;
}

void ProgressBar::finish() {
  if (tty_ && bar_shown_) std::fprintf(out_, "\n");
  bar_shown_ = false;
  std::fflush(out_);
}

MetricsLog::MetricsLog(const std::string& path, int64_t keep_through_step) : path_(path) {
  if (keep_through_step >= 0 && std::filesystem::exists(path)) {
    const std::string old = read_file(path);
    std::string kept;
    for (size_t at = 0; at < old.size();) {
      const size_t end = old.find('\n', at);
      if (end == std::string::npos) break;  // torn: the process died while writing it
      const std::string line = old.substr(at, end - at);
      at = end + 1;
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object()) continue;
      const auto step = j.find("step");
      if (step != j.end() && step->is_number() && step->get<double>() > double(keep_through_step)) continue;
      kept += line + "\n";
    }
    if (kept != old) write_file_atomic(path, kept);
  }
  f_ = std::fopen(path.c_str(), "a");
  QKV_CHECK(f_ != nullptr, path, "cannot open metrics log for appending: ", std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (f_) std::fclose(f_);
}

void MetricsLog::write(const std::map<std::string, double>& values, const std::string& kind) {
  nlohmann::json j = nlohmann::json::object();
  j["kind"] = kind;
  for (auto& [k, v] : values) j[k] = v;
  std::string line = j.dump() + "\n";
  QKV_CHECK(std::fwrite(line.data(), 1, line.size(), f_) == line.size() && std::fflush(f_) == 0, path_,
            "write failed: ", std::strerror(errno));
}

namespace {
volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_stop_signal(int) { g_stop = 1; }
}  // namespace

void install_stop_signal_handlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool stop_requested() { return g_stop != 0; }
void reset_stop_request() { g_stop = 0; }

}  // namespace qkv::train
