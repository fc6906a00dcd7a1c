#include "metrics.h"

#include <cstdio>

namespace qkv::serve {

namespace {
constexpr double kRateWindow = 10.0;  // seconds over which qkv_tokens_per_second is averaged

std::string fmt(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", x);
  return b;
}

// A label value, escaped as the text format says (backslash, quote, newline).
std::string label(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '\\') o += "\\\\";
    else if (c == '"') o += "\\\"";
    else if (c == '\n') o += "\\n";
    else o += c;
  }
  return o;
}
}  // namespace

const std::vector<double>& Metrics::buckets() {
  static const std::vector<double> b = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  return b;
}

void Metrics::request_done(const std::string& endpoint, int status, double seconds) {
  std::lock_guard<std::mutex> lk(mu_);
  ++requests_[{endpoint, status}];
  Histogram& h = latency_[endpoint];
  if (h.counts.empty()) h.counts.assign(buckets().size() + 1, 0);
  size_t i = 0;
  while (i < buckets().size() && seconds > buckets()[i]) ++i;
  ++h.counts[i];
  h.sum += seconds;
  ++h.count;
}

void Metrics::tokens(const std::string& model, int64_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  tokens_total_[model] += uint64_t(n);
  recent_[model].emplace_back(Clock::now(), n);
}

void Metrics::batch(const std::string& model, size_t inputs) {
  std::lock_guard<std::mutex> lk(mu_);
  auto& b = batches_[model];
  ++b.first;
  b.second += inputs;
}

std::string Metrics::prometheus(const Gauges& g) const {
  std::lock_guard<std::mutex> lk(mu_);
  std::string o;
  o += "# HELP qkv_requests_total HTTP requests answered, by endpoint and status.\n"
       "# TYPE qkv_requests_total counter\n";
  std::map<std::string, uint64_t> errors;
  for (auto& [k, n] : requests_) {
    o += "qkv_requests_total{endpoint=\"" + label(k.first) + "\",status=\"" + std::to_string(k.second) + "\"} " +
         std::to_string(n) + "\n";
    if (k.second >= 400) errors[k.first] += n;
    else errors[k.first] += 0;
  }
  o += "# HELP qkv_errors_total HTTP requests answered with a status of 400 or more, by endpoint.\n"
       "# TYPE qkv_errors_total counter\n";
  for (auto& [e, n] : errors) o += "qkv_errors_total{endpoint=\"" + label(e) + "\"} " + std::to_string(n) + "\n";
  o += "# HELP qkv_requests_in_flight Requests being answered now (the --max-concurrent slots taken).\n"
       "# TYPE qkv_requests_in_flight gauge\n"
       "qkv_requests_in_flight " + std::to_string(g.in_flight) + "\n";
  o += "# HELP qkv_queue_length Inputs waiting in a model's batching queue.\n"
       "# TYPE qkv_queue_length gauge\n";
  for (auto& [m, n] : g.queue) o += "qkv_queue_length{model=\"" + label(m) + "\"} " + std::to_string(n) + "\n";
  o += "# HELP qkv_tokens_total Tokens generated (translate, completions), scored (score) or read (embeddings, "
       "classify), by model.\n"
       "# TYPE qkv_tokens_total counter\n";
  for (auto& [m, n] : tokens_total_) o += "qkv_tokens_total{model=\"" + label(m) + "\"} " + std::to_string(n) + "\n";
  o += "# HELP qkv_batches_total Library calls the batching loop made, by model.\n"
       "# TYPE qkv_batches_total counter\n";
  for (auto& [m, b] : batches_) o += "qkv_batches_total{model=\"" + label(m) + "\"} " + std::to_string(b.first) + "\n";
  o += "# HELP qkv_batch_inputs_total Inputs (texts, prompts) in those calls, by model.\n"
       "# TYPE qkv_batch_inputs_total counter\n";
  for (auto& [m, b] : batches_) o += "qkv_batch_inputs_total{model=\"" + label(m) + "\"} " + std::to_string(b.second) + "\n";
  o += "# HELP qkv_tokens_per_second Tokens per second over the last 10 seconds, by model.\n"
       "# TYPE qkv_tokens_per_second gauge\n";
  const auto now = Clock::now();
  for (auto& [m, q] : recent_) {
    while (!q.empty() && std::chrono::duration<double>(now - q.front().first).count() > kRateWindow) q.pop_front();
    int64_t n = 0;
    for (auto& e : q) n += e.second;
    o += "qkv_tokens_per_second{model=\"" + label(m) + "\"} " + fmt(double(n) / kRateWindow) + "\n";
  }
  o += "# HELP qkv_request_duration_seconds Time from a request's headers to the end of its answer, by endpoint.\n"
       "# TYPE qkv_request_duration_seconds histogram\n";
  for (auto& [e, h] : latency_) {
    uint64_t cum = 0;
    for (size_t i = 0; i <= buckets().size(); ++i) {
      cum += h.counts[i];
      const std::string le = i < buckets().size() ? fmt(buckets()[i]) : "+Inf";
      o += "qkv_request_duration_seconds_bucket{endpoint=\"" + label(e) + "\",le=\"" + le + "\"} " +
           std::to_string(cum) + "\n";
    }
    o += "qkv_request_duration_seconds_sum{endpoint=\"" + label(e) + "\"} " + fmt(h.sum) + "\n";
    o += "qkv_request_duration_seconds_count{endpoint=\"" + label(e) + "\"} " + std::to_string(h.count) + "\n";
  }
  return o;
}

}  // namespace qkv::serve
