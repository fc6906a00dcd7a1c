// The HTTP side of the server: cpp-httplib's routes, the limits that apply to every request
// (body size, concurrent requests, draining), the request log and metrics, and shutdown.
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>

#include "qkv/util/error.h"
#include "server_impl.h"

namespace qkv::serve {

RequestInfo& current_request() {
  thread_local RequestInfo info;
  return info;
}

void send_error(httplib::Response& res, const HttpError& e) {
  nlohmann::json err{{"message", e.what()}, {"type", e.type}};
  err["param"] = e.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.param);
  err["code"] = e.code.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.code);
  res.status = e.status;
  res.set_content(dump({{"error", err}}), "application/json");
}

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

ModelSpec parse_model_spec(const std::string& arg) {
  ModelSpec s;
  const size_t eq = arg.find('=');
  if (eq != std::string::npos && eq > 0) {
    s.name = arg.substr(0, eq);
    s.dir = arg.substr(eq + 1);
  } else {
    s.dir = arg;
    std::filesystem::path p(arg);
    s.name = (p.has_filename() ? p.filename() : p.parent_path().filename()).string();
  }
  QKV_CHECK(!s.dir.empty(), "serve", "--model ", arg, ": expected DIR or NAME=DIR");
  QKV_CHECK(!s.name.empty(), "serve", "--model ", arg, ": cannot name the model from its directory; use NAME=DIR");
  return s;
}

namespace {

const std::set<std::string>& endpoints() {
  static const std::set<std::string> e = {"/v1/translate", "/v1/score",  "/v1/completions", "/v1/embeddings",
                                          "/v1/classify",  "/v1/tag",    "/v1/answer",      "/tokenize",
                                          "/detokenize",   "/health",    "/metrics"};
  return e;
}

// The default error bodies cpp-httplib would leave empty (no route, body too large, ...).
HttpError default_error(const httplib::Request& req, int status, size_t max_body) {
  if (status == 404)
    return HttpError(404, "no such endpoint: " + req.method + " " + req.path +
                              " (POST /v1/translate, /v1/score, /v1/completions, /v1/embeddings, /v1/classify, "
                              "/v1/tag, /v1/answer, /tokenize, /detokenize; GET /health, /metrics)",
                     "not_found");
  if (status == 413)
    return limit_error(413, "max_body_bytes",
                       "the request body is larger than " + std::to_string(max_body) + " bytes (--max-body-bytes)");
  return HttpError(status, "HTTP status " + std::to_string(status) + " for " + req.method + " " + req.path,
                   status >= 500 ? "server_error" : "invalid_request_error");
}

}  // namespace

Server::Impl::Impl(const std::vector<ModelSpec>& specs, ServerOptions o) : opt(std::move(o)) {
  QKV_CHECK(!specs.empty(), "serve", "no model: give --model DIR or --model NAME=DIR");
  std::set<std::string> names;
  for (auto& s : specs) {
    QKV_CHECK(names.insert(s.name).second, "serve", "two models are named '", s.name, "'; name them with NAME=DIR");
    BatchOptions b = opt.batch;
    b.max_queue = opt.limits.max_queue;
    models.push_back(std::make_unique<ServedModel>(s.name, s.dir, opt.precision, b, &metrics));
  }
  routes();
}

Slot Server::Impl::acquire_slot() {
  if (++in_flight > opt.limits.max_concurrent) {
    --in_flight;
    throw limit_error(429, "max_concurrent",
                      "the server is answering " + std::to_string(opt.limits.max_concurrent) +
                          " requests already (--max-concurrent); retry later");
  }
  return Slot(nullptr, [this](void*) { --in_flight; });
}

// cpp-httplib 0.11's default sets SO_REUSEPORT, so a second server on a port in use bound it too
// and the kernel shared connections between the two (possibly serving other models), where a
// bind error was wanted: SO_REUSEADDR alone lets a restart take a port still in TIME_WAIT and
// nothing more. Its listen() asks for a queue of 5 connections, compiled into Debian's library; a
// burst of 100 connects then lost SYNs and waited out retransmits (up to 14 s on loopback), so
// bind() asks again for the system's longest queue on the socket noted here.
void Server::Impl::socket_options() {
  http.set_socket_options([this](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_fd = sock;  // called once per address tried; the last is the one bound
  });
}

void Server::Impl::routes() {
  socket_options();
  const int threads = opt.threads > 0 ? opt.threads : int(opt.limits.max_concurrent) + 8;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  http.set_payload_max_length(opt.limits.max_body_bytes);
  http.set_keep_alive_max_count(100000);
  http.set_tcp_nodelay(true);

  // Runs before cpp-httplib reads a body. A request with neither Content-Length nor chunked
  // Transfer-Encoding has no body (RFC 9112, 6.3), but cpp-httplib 0.11 reads one until the
  // connection closes or its 5 s read timeout: `curl -X POST` without -d waited 5 s for a 400 that
  // named nothing. Such a request is answered here at once, as one with Content-Length: 0 is.
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    RequestInfo& info = current_request();
    info = {++next_id, std::chrono::steady_clock::now(), 0};
    res.set_header("X-Request-Id", std::to_string(info.id));
    const bool body_expected = req.method == "POST" || req.method == "PUT" || req.method == "PATCH" ||
                               req.method == "DELETE" || req.method == "PRI";  // cpp-httplib's expect_content
    if (req.has_header("Content-Length")) {  // digits only: "-5" was read as a huge length, 5 s, then a 413
      const std::string n = req.get_header_value("Content-Length");
      if (!n.empty() && n.size() <= 19 && std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return httplib::Server::HandlerResponse::Unhandled;
      send_error(res, HttpError(400, "Content-Length '" + n + "' is not a byte count (expected digits)"));
      return httplib::Server::HandlerResponse::Handled;
    }
    std::string coding = req.get_header_value("Transfer-Encoding");  // names are case-insensitive
    std::transform(coding.begin(), coding.end(), coding.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    if (!body_expected || coding.find("chunked") != std::string::npos) return httplib::Server::HandlerResponse::Unhandled;
    if (req.method == "POST" && endpoints().count(req.path) && req.path != "/health" && req.path != "/metrics")
      send_error(res, HttpError(400, req.path + ": the request body is empty; expected a JSON object"));
    else
      send_error(res, default_error(req, 404, opt.limits.max_body_bytes));
    return httplib::Server::HandlerResponse::Handled;
  });
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // an endpoint's own error
        send_error(res, default_error(req, res.status, opt.limits.max_body_bytes));
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, HttpError(500, what, "server_error"));
  });
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    const RequestInfo& info = current_request();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - info.start).count();
    metrics.request_done(endpoints().count(req.path) ? req.path : "other", res.status, ms / 1000);
    if (opt.log)
      std::fprintf(stderr, "qkv serve: #%llu %s %s %d tokens=%lld %.1f ms\n", (unsigned long long)info.id,
                   req.method.c_str(), req.path.c_str(), res.status, (long long)info.tokens, ms);
  });

  // A model endpoint: refused while draining, holds a --max-concurrent slot while it runs.
  auto guarded = [this](auto handler) {
    return [this, handler](const httplib::Request& req, httplib::Response& res) {
      try {
        if (draining) throw HttpError(503, "the server is shutting down", "unavailable");
        Slot slot = acquire_slot();
        handler(req, res, std::move(slot));
      } catch (const HttpError& e) {
        send_error(res, e);
      } catch (const std::exception& e) {
        send_error(res, HttpError(500, e.what(), "server_error"));
      }
    };
  };
  // A POST body is read here, not by cpp-httplib: 0.11 applies its payload limit to a Content-Length
  // only and read a chunked body whole, however large (100 MB of one was answered 200). Past the
  // limit the rest is read and dropped, as cpp-httplib does for a Content-Length that is too large,
  // so that the client reads its 413 instead of a reset connection; a body that goes on for 64 MiB
  // more than that loses its connection.
  auto with_body = [this](auto handler) {
    return [this, handler](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read) {
      const size_t max = opt.limits.max_body_bytes, give_up = max + (size_t(64) << 20);
      httplib::Request whole = req;
      size_t seen = 0;
      const bool complete = read([&](const char* data, size_t n) {
        seen += n;
        if (seen <= max) whole.body.append(data, n);
        return seen <= give_up;
      });
      if (complete && seen <= max) return handler(whole, res);
      // Past the limit (read whole or given up on): 413; else cpp-httplib's own status for the failed read.
      send_error(res, default_error(req, seen > max ? 413 : (res.status >= 400 ? res.status : 400), max));
    };
  };
  http.Post("/v1/translate", with_body(guarded([this](auto& q, auto& r, Slot) { translate(q, r); })));
  http.Post("/v1/score", with_body(guarded([this](auto& q, auto& r, Slot) { score(q, r); })));
  http.Post("/v1/completions",
            with_body(guarded([this](auto& q, auto& r, Slot s) { completions(q, r, std::move(s)); })));
  http.Post("/v1/embeddings", with_body(guarded([this](auto& q, auto& r, Slot) { embeddings(q, r); })));
  http.Post("/v1/classify", with_body(guarded([this](auto& q, auto& r, Slot) { classify(q, r); })));
  http.Post("/v1/tag", with_body(guarded([this](auto& q, auto& r, Slot) { tag(q, r); })));
  http.Post("/v1/answer", with_body(guarded([this](auto& q, auto& r, Slot) { answer(q, r); })));
  http.Post("/tokenize", with_body(guarded([this](auto& q, auto& r, Slot) { tokenize(q, r); })));
  http.Post("/detokenize", with_body(guarded([this](auto& q, auto& r, Slot) { detokenize(q, r); })));
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) { health(res); });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    Metrics::Gauges g;
    g.in_flight = in_flight.load();
    for (auto& m : models) g.queue.emplace_back(m->name(), m->queue().queued_items());
    res.set_content(metrics.prometheus(g), "text/plain; version=0.0.4");
  });
}

void Server::Impl::health(httplib::Response& res) {
  nlohmann::json ms = nlohmann::json::array();
  for (auto& m : models) ms.push_back({{"name", m->name()}, {"kind", kind_name(m->kind())}});
  res.status = draining ? 503 : 200;
  res.set_content(dump({{"status", draining ? "draining" : "ok"}, {"models", ms}}), "application/json");
}

Server::Server(const std::vector<ModelSpec>& models, ServerOptions opt)
    : impl_(std::make_unique<Impl>(models, std::move(opt))) {}

Server::~Server() {
  shutdown();
  // the models' queues stop (answering what they hold) as impl_ goes
}

int Server::bind() {
  Impl& s = *impl_;
  int port = s.opt.port;
  if (port == 0) {
    port = s.http.bind_to_any_port(s.opt.host);
    QKV_CHECK(port > 0, "serve", "cannot bind a free port on ", s.opt.host);
  } else {
    QKV_CHECK(s.http.bind_to_port(s.opt.host, port), "serve", "cannot listen on ", s.opt.host, ":", port,
              " (in use, or not an address of this machine)");
  }
  QKV_CHECK(::listen(s.listen_fd, SOMAXCONN) == 0, "serve", "cannot lengthen the accept queue of ", s.opt.host,
            ":", port, ": ", std::strerror(errno));
  s.bound = true;
  return port;
}

void Server::run() {
  if (!impl_->bound) bind();
  impl_->listening = true;  // seq_cst with shutdown()'s store to draining: one of them sees the other
  if (impl_->draining) return;
  impl_->http.listen_after_bind();  // returns after stop(), once the worker threads are done
  impl_->finished = true;
}

void Server::shutdown() {
  impl_->draining = true;
  if (impl_->listening && !impl_->finished) {  // run() may be between its check and the listen loop: wait for the loop
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!impl_->http.is_running() && !impl_->finished && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  impl_->http.stop();
}

int64_t Server::in_flight() const { return impl_->in_flight.load(); }

}  // namespace qkv::serve
