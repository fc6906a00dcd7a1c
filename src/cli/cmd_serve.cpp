// qkv serve --model DIR [--model NAME=DIR ...]: an HTTP server over the models (serve/server.h).
// Prints "qkv serve: listening on http://HOST:PORT" on stderr once it accepts connections (with
// --port 0, the free port chosen). SIGTERM or SIGINT: stop accepting, let the requests in flight
// finish within --drain-timeout seconds, exit 0 (1 if the timeout cut requests off).
#include <signal.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "cli.h"
#include "qkv/serve/server.h"

namespace qkv::cli {
namespace {

int run_serve(int argc, char** argv) {
  CLI::App app{"Serve models over HTTP: translation, scoring, completions, embeddings, classification, tagging, "
               "question answering (JSON; OpenAI's shapes for completions and embeddings)",
               "qkv serve"};
  std::vector<std::string> model_args;
  serve::ServerOptions opt;
  serve::Limits& lim = opt.limits;
  double max_wait_ms = 2, drain_seconds = 30;
  app.add_option("--model,-m", model_args, "model directory, or NAME=DIR (repeatable; the kind is read from config.json)")
      ->required();
  app.add_option("--host", opt.host, "address to listen on")->capture_default_str();
  app.add_option("--port", opt.port, "port (0: any free port, printed)")->capture_default_str()->check(CLI::Range(0, 65535));
  app.add_option("--max-batch", opt.batch.max_batch, "inputs decoded together in one batch")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--max-wait-ms", max_wait_ms, "how long a request waits for others to share its batch")
      ->capture_default_str()->check(CLI::Range(0.0, 10000.0));
  app.add_option("--max-body-bytes", lim.max_body_bytes, "largest request body (413 past it)")
      ->capture_default_str()->check(CLI::Range(size_t(1), size_t(1) << 34));
  app.add_option("--max-inputs", lim.max_inputs, "texts or prompts in one request (400 past it)")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  app.add_option("--max-input-tokens", lim.max_input_tokens, "tokens of one text or prompt (400 past it)")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  app.add_option("--max-tokens", lim.max_tokens, "max_tokens / max_length a request may ask (400 past it)")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  app.add_option("--max-beam", lim.max_beam, "beam size a translation request may ask (400 past it)")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(256)));
  app.add_option("--max-concurrent", lim.max_concurrent, "requests answered at once (429 past it)")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(100000)));
  app.add_option("--max-queue", lim.max_queue, "inputs waiting in one model's queue (429 past it)")
      ->capture_default_str()->check(CLI::Range(size_t(1), size_t(1) << 30));
  app.add_option("--threads", opt.threads, "HTTP worker threads (0: max-concurrent + 8)")
      ->capture_default_str()->check(CLI::Range(0, 100000));
  app.add_option("--drain-timeout", drain_seconds, "seconds the requests in flight get to finish after SIGTERM")
      ->capture_default_str()->check(CLI::Range(0.0, 86400.0));
  bool quiet = false;
  app.add_flag("--quiet,-q", quiet, "no request log on stderr");
  std::string precision = "fp32";
  add_precision_option(app, precision);
  QKV_PARSE(app, argc, argv);
  opt.precision = read_precision(precision, "qkv serve");
  opt.batch.max_wait = std::chrono::microseconds(int64_t(max_wait_ms * 1000));
  opt.log = !quiet;

  // SIGTERM and SIGINT go to one thread (sigwait), blocked everywhere else: every thread the
  // server starts inherits this mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  std::vector<serve::ModelSpec> specs;
  for (auto& a : model_args) specs.push_back(serve::parse_model_spec(a));
  serve::Server server(specs, opt);
  const int port = server.bind();
  std::fprintf(stderr, "qkv serve: listening on http://%s:%d\n", opt.host.c_str(), port);
  std::fflush(stderr);

  std::mutex mu;
  std::condition_variable cv;
  bool served = false;
  std::thread signals([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    {
      std::lock_guard<std::mutex> lk(mu);
      if (served) return;  // run() ended on its own
    }
    std::fprintf(stderr, "qkv serve: %s: no new requests; draining %lld in flight (up to %g s)\n",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT", (long long)server.in_flight(), drain_seconds);
    server.shutdown();
    std::unique_lock<std::mutex> lk(mu);
    if (!cv.wait_for(lk, std::chrono::duration<double>(drain_seconds), [&] { return served; })) {
      std::fprintf(stderr, "qkv serve: %lld requests still in flight after %g s; exiting\n",
                   (long long)server.in_flight(), drain_seconds);
      std::_Exit(1);
    }
  });
  server.run();
  {
    std::lock_guard<std::mutex> lk(mu);
    served = true;
  }
  cv.notify_all();
  if (signals.joinable()) {
    pthread_kill(signals.native_handle(), SIGTERM);  // wakes sigwait if no signal came
    signals.join();
  }
  std::fprintf(stderr, "qkv serve: stopped\n");
  return 0;
}

Register register_serve(
    "serve",
    "serve models over HTTP (translate, score, completions, embeddings, classify, tag, answer; batching, "
    "limits)",
    run_serve);

}  // namespace
}  // namespace qkv::cli
