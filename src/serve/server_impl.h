// src/serve/server_impl.h - what server.cpp (HTTP wiring, limits, logs, shutdown) and
// endpoints.cpp (each endpoint's request and answer) share.
#pragma once
#include <httplib.h>

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "json_request.h"
#include "metrics.h"
#include "qkv/serve/server.h"
#include "served_model.h"

namespace qkv::serve {

// What the request log and the metrics need to know of the request this thread is answering
// (cpp-httplib runs a request's routing, handler, streaming and logger on one thread).
struct RequestInfo {
  uint64_t id = 0;
  std::chrono::steady_clock::time_point start{};
  int64_t tokens = 0;
};
RequestInfo& current_request();

// A --max-concurrent slot, held while a request is answered (by a stream until it ends).
using Slot = std::shared_ptr<void>;

struct Server::Impl {
  ServerOptions opt;
  Metrics metrics;
  std::vector<std::unique_ptr<ServedModel>> models;
  httplib::Server http;
  std::atomic<int64_t> in_flight{0};
  std::atomic<uint64_t> next_id{0}, next_sample_key{0};
  std::atomic<bool> draining{false}, listening{false}, finished{false};
  bool bound = false;
  int listen_fd = -1;  // the listening socket, as cpp-httplib last created one (socket_options())

  Impl(const std::vector<ModelSpec>& specs, ServerOptions o);
  void routes();
  void socket_options();  // how the listening socket is made: its port exclusive, a long accept queue
  Slot acquire_slot();  // throws the max_concurrent 429

  // Endpoints (endpoints.cpp). Each throws HttpError for an answer other than 200.
  void translate(const httplib::Request& req, httplib::Response& res);
  void score(const httplib::Request& req, httplib::Response& res);
  void completions(const httplib::Request& req, httplib::Response& res, Slot slot);
  void embeddings(const httplib::Request& req, httplib::Response& res);
  void classify(const httplib::Request& req, httplib::Response& res);
  void tag(const httplib::Request& req, httplib::Response& res);
  void answer(const httplib::Request& req, httplib::Response& res);
  void tokenize(const httplib::Request& req, httplib::Response& res);
  void detokenize(const httplib::Request& req, httplib::Response& res);
  void health(httplib::Response& res);

  // The model that answers `endpoint`: the one named in "model", else the only one of `kind`
  // (any kind when kind is null).
  ServedModel& pick(const JsonRequest& body, const std::string& endpoint, const Kind* kind);
  // Queues the job on the model (the max_queue 429 when full) and waits for it (non-streaming).
  void submit(ServedModel& m, const std::shared_ptr<Job>& job);
  void wait(Job& job);
};

// The limits every endpoint checks (400 past them): texts in one request (--max-inputs), and one
// text's tokens (--max-input-tokens); `field` is the request's field, `i` the text's index in it.
void check_inputs(size_t n, const Limits& lim, const std::string& endpoint, const std::string& field);
void check_tokens(int64_t n, size_t i, const Limits& lim, const std::string& endpoint, const std::string& field);

// One text ("text", a string) or several ("texts", an array of strings, not empty); 400s name the
// field. field: the name used.
struct Texts {
  std::vector<std::string> texts;
  std::string field;
};
Texts one_or_many_texts(const JsonRequest& body, const std::string& endpoint);

// Two texts per input, e.g. /v1/score's "source" and "target" (one pair, strings) or "sources" and
// "targets" (arrays of the same length, not empty); 400s name the fields. fields: the names used.
struct TextPairs {
  std::vector<std::string> first, second;
  std::array<std::string, 2> fields;
};
TextPairs text_pairs(const JsonRequest& body, const std::string& endpoint, const std::array<std::string, 2>& one,
                     const std::array<std::string, 2>& many);

// {"error": {...}} with the error's status.
void send_error(httplib::Response& res, const HttpError& e);
// JSON out: strings that are not valid UTF-8 are replaced, never a throw.
std::string dump(const nlohmann::json& j);

}  // namespace qkv::serve
