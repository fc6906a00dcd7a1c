// qkv/serve/server.h - `qkv serve`: an HTTP server (cpp-httplib) over the loaded models of
// tasks/ (Translator, Generator, Embedder, Classifier), with a batching queue per model.
//
//   qkv::serve::Server s({{"de", "runs/demo/model"}}, {.port = 0});
//   int port = s.bind();   // the free port chosen
//   s.run();               // until shutdown() (e.g. from a SIGTERM thread)
//
// Endpoints (JSON in and out; docs/serve.md has every field):
//   POST /v1/translate     {"text"} or {"texts"}, beam, alpha, max_length -> {"translations"}
//   POST /v1/completions   OpenAI's completions (prompt, max_tokens, temperature, top_p, top_k, stop,
//                          seed, stream: server-sent events ending with "data: [DONE]")
//   POST /v1/embeddings    OpenAI's embeddings (input), BERT [CLS] or mean pooling
//   POST /v1/classify      {"text"[, "text_pair"]} or {"texts"[, "text_pairs"]} -> labels + probabilities
//   POST /tokenize, /detokenize; GET /health, /metrics (Prometheus text)
// A request names its model ("model") when several models could answer it. Every error is a JSON
// {"error": {"message", "type", "param", "code"}} with a 4xx/5xx status; a limit's code is its name.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qkv/kernels/bf16.h"
#include "qkv/serve/batch_queue.h"

namespace qkv::serve {

// Limits, each with the flag of `qkv serve` that sets it and the status past it.
struct Limits {
  size_t max_body_bytes = 1 << 20;  // --max-body-bytes: request body size (413)
  int64_t max_inputs = 64;          // --max-inputs: texts / prompts in one request (400)
  int64_t max_input_tokens = 512;   // --max-input-tokens: tokens of one text or prompt (400)
  int64_t max_tokens = 512;         // --max-tokens: max_tokens / max_length a request may ask (400)
  int64_t max_beam = 16;            // --max-beam: beam size a translation may ask (400)
  int64_t max_concurrent = 64;      // --max-concurrent: requests answered at once (429)
  size_t max_queue = 256;           // --max-queue: inputs waiting in one model's queue (429)
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (bind() returns it)
  Limits limits;
  BatchOptions batch;  // --max-batch, --max-wait-ms (max_queue is limits.max_queue)
  int threads = 0;     // HTTP worker threads; 0: max_concurrent + 8 (keep-alive connections hold one each)
  bool log = true;     // one line per request on stderr: id, endpoint, status, tokens, milliseconds
  kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32;
};

struct ModelSpec {
  std::string name, dir;
};
// "NAME=DIR", or "DIR" (the name is the directory's last component).
ModelSpec parse_model_spec(const std::string& arg);

class Server {
 public:
  // Loads every model (errors name the directory and the file); names must be distinct.
  Server(const std::vector<ModelSpec>& models, ServerOptions opt);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int bind();  // binds host:port (a qkv::Error naming them if it cannot); returns the port
  // Serves until shutdown(); returns once the requests in flight have been answered.
  void run();
  // Stops accepting connections and new requests (503); run() returns when the requests in
  // flight are done. Safe from any thread, any number of times.
  void shutdown();
  int64_t in_flight() const;  // requests being answered

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qkv::serve
