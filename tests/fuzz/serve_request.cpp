// Fuzz target: the request bodies `qkv serve` reads from whoever connects. The first byte picks
// the endpoint (one of the nine POST routes), the rest is the body, posted over loopback to a
// server in this process that serves small random models (tests/common/tiny_models.h): a
// translation Transformer, a GPT, a BERT encoder, two BERT classifiers (texts, pairs), a BERT
// tagger and a BERT span (question answering) model.
// The contract: every request is answered; a 200 is JSON (or, streamed, server-sent events ending
// with "data: [DONE]"); anything else is a 4xx whose body is the error object
// {"error": {"message": non-empty, "type", ...}}. A 5xx (an exception the endpoints did not turn
// into a clear answer), no answer, or a sanitizer report is a bug.
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "fuzz_target.h"
#include "qkv/serve/server.h"
#include "tiny_models.h"

namespace {

// New routes go last: a seed's first byte keeps its endpoint.
constexpr const char* kPaths[] = {"/v1/translate", "/v1/completions", "/v1/embeddings", "/v1/classify", "/tokenize",
                                  "/detokenize",   "/v1/score",       "/v1/tag",        "/v1/answer"};

// The server, started on the first input and never stopped: at exit its threads are idle in their
// waits, and stopping it then could run after statics it uses were destroyed. (Held by a static
// pointer, it is reachable memory, not a leak, to LeakSanitizer.)
struct Served {
  std::unique_ptr<qkv::serve::Server> server;
  std::thread thread;
  int port = 0;
};

Served& served() {
  static Served* s = [] {
    const qkv_test::TinyModelDirs d = qkv_test::write_tiny_model_dirs(qkv::fuzz::scratch_dir() + "/serve_models");
    qkv::serve::ServerOptions opt;
    opt.host = "127.0.0.1", opt.port = 0, opt.log = false, opt.threads = 4;
    opt.limits.max_body_bytes = 1 << 17;  // above libFuzzer's -max_len (scripts/fuzz.sh): bodies get parsed
    opt.limits.max_inputs = 8, opt.limits.max_tokens = 24, opt.limits.max_beam = 4;  // each input stays cheap
    auto* out = new Served;
    out->server = std::make_unique<qkv::serve::Server>(
        std::vector<qkv::serve::ModelSpec>{
            {"mt", d.translation}, {"gpt", d.gpt}, {"bert", d.bert}, {"cls", d.cls}, {"pair", d.pair},
            {"tag", d.tag}, {"qa", d.qa}},
        opt);
    out->port = out->server->bind();
    out->thread = std::thread([out] { out->server->run(); });
    return out;
  }();
  return *s;
}

}  // namespace

QKV_FUZZ_TARGET(serve_request) {
  if (size == 0) return 0;
  const std::string path = kPaths[data[0] % (sizeof kPaths / sizeof kPaths[0])];
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  httplib::Client client("127.0.0.1", served().port);
  client.set_read_timeout(30, 0);
  httplib::Result r = client.Post(path.c_str(), body, "application/json");
  const std::string where = "POST " + path + " with " + std::to_string(body.size()) + " bytes";
  if (!r) qkv::fuzz::bug(where + ": no answer (" + httplib::to_string(r.error()) + ")");
  const int status = r->status;
  const std::string& reply = r->body;
  if (status == 200) {
    if (reply.rfind("data: ", 0) == 0) {  // a stream: server-sent events, the last one [DONE]
      const std::string done = "data: [DONE]\n\n";
      if (reply.size() < done.size() || reply.compare(reply.size() - done.size(), done.size(), done) != 0)
        qkv::fuzz::bug(where + ": a stream that does not end with [DONE]: " + reply.substr(0, 400));
    } else if (!nlohmann::json::accept(reply)) {
      qkv::fuzz::bug(where + ": 200 with a body that is not JSON: " + reply.substr(0, 400));
    }
    return 0;
  }
  if (status < 400 || status >= 500)
    qkv::fuzz::bug(where + ": status " + std::to_string(status) + ": " + reply.substr(0, 400));
  const nlohmann::json j = nlohmann::json::parse(reply, nullptr, /*allow_exceptions=*/false);
  const bool error_object = j.is_object() && j.contains("error") && j["error"].is_object() &&
                            j["error"].contains("message") && j["error"]["message"].is_string() &&
                            !j["error"]["message"].get<std::string>().empty() && j["error"].contains("type");
  if (!error_object)
    qkv::fuzz::bug(where + ": status " + std::to_string(status) + " without an error object: " + reply.substr(0, 400));
  return 0;
}
