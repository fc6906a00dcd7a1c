// tests/serve/serve_fixture.h - a server running in this process on a free loopback port, the
// small model directories it serves (tests/common/tiny_models.h, written once per process), and
// a client (cpp-httplib's) that posts JSON and reads the answer.
#pragma once
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "qkv/serve/server.h"
#include "qkv/util/file.h"
#include "scratch_util.h"
#include "tiny_models.h"

namespace qkv_test {

// The model directories (tiny_models.h: write_tiny_model_dirs), written once per process.
struct ServeModels : TinyModelDirs {
  static const ServeModels& get() {
    static const ServeModels m{write_tiny_model_dirs(scratch_dir("serve_models"))};
    return m;
  }
  std::vector<qkv::serve::ModelSpec> all() const {
    return {{"mt", translation}, {"gpt", gpt}, {"bert", bert}, {"cls", cls}, {"pair", pair}, {"tag", tag}, {"qa", qa}};
  }
};

struct RunningServer {
  std::unique_ptr<qkv::serve::Server> server;
  std::thread thread;
  int port = 0;

  explicit RunningServer(std::vector<qkv::serve::ModelSpec> models, qkv::serve::ServerOptions opt = {}) {
    opt.host = "127.0.0.1";
    opt.port = 0;
    opt.log = false;
    server = std::make_unique<qkv::serve::Server>(models, opt);
    port = server->bind();
    thread = std::thread([this] { server->run(); });
  }
  ~RunningServer() {
    server->shutdown();
    thread.join();
  }
};

struct Reply {
  int status = 0;  // 0: no answer (connection error)
  std::string body;
  nlohmann::json json;  // null unless the body is JSON
};

inline Reply request(int port, const std::string& method, const std::string& path, const std::string& body = "") {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  c.set_connection_timeout(10, 0);
  httplib::Result r = method == "GET" ? c.Get(path.c_str()) : c.Post(path.c_str(), body, "application/json");
  Reply out;
  if (!r) return out;
  out.status = r->status;
  out.body = r->body;
  try {
    out.json = nlohmann::json::parse(r->body);
  } catch (const nlohmann::json::exception&) {
  }
  return out;
}

inline Reply post(int port, const std::string& path, const nlohmann::json& body) {
  return request(port, "POST", path, body.dump());
}

// The message of an error answer ("" if it is not one).
inline std::string error_message(const Reply& r) {
  if (!r.json.is_object() || !r.json.contains("error")) return "";
  return r.json["error"].value("message", "");
}

// The value of a metric line `name{labels} value` in Prometheus text (-1 when absent).
inline double metric(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

// Waits (up to 4 s) until /metrics shows `series` at `value`. The request counters and the
// latency histogram count an answer once it is written (cpp-httplib's logger runs after the
// write), so a client can read its answer before the server has counted it.
inline bool wait_metric(int port, const std::string& series, double value) {
  for (int i = 0; i < 2000; ++i) {
    if (metric(request(port, "GET", "/metrics").body, series) == value) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

}  // namespace qkv_test
