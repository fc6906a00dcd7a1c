// src/serve/metrics.h - the server's counters in the Prometheus text format (version 0.0.4):
// requests and errors by endpoint and status, requests in flight, queue lengths, generated
// tokens and their rate over the last 10 s, and a latency histogram by endpoint.
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace qkv::serve {

class Metrics {
 public:
  // A request answered: its endpoint (a path the server knows, else "other"), status, seconds.
  void request_done(const std::string& endpoint, int status, double seconds);
  // Tokens a model generated (translations, completions) or read (embeddings, classification).
  void tokens(const std::string& model, int64_t n);
  // A library call the batching loop made for a model, with this many inputs.
  void batch(const std::string& model, size_t inputs);

  struct Gauges {
    int64_t in_flight = 0;
    std::vector<std::pair<std::string, size_t>> queue;  // model -> inputs waiting
  };
  std::string prometheus(const Gauges& g) const;

  static const std::vector<double>& buckets();  // latency bucket bounds, seconds

 private:
  struct Histogram {
    std::vector<uint64_t> counts;  // per bucket (not cumulative), + the +Inf one
    double sum = 0;
    uint64_t count = 0;
  };
  using Clock = std::chrono::steady_clock;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;  // (endpoint, status)
  std::map<std::string, Histogram> latency_;                  // endpoint
  std::map<std::string, uint64_t> tokens_total_;              // model
  std::map<std::string, std::pair<uint64_t, uint64_t>> batches_;  // model -> (calls, inputs)
  mutable std::map<std::string, std::deque<std::pair<Clock::time_point, int64_t>>> recent_;  // last 10 s
};

}  // namespace qkv::serve
