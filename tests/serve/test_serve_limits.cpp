// qkv serve under limits and bad input: every limit answers its 4xx with a JSON error naming it
// (body size 413; inputs, input tokens, max_tokens, beam 400; concurrent requests and queue
// length 429); malformed JSON, wrong types, unknown fields, invalid UTF-8, huge numbers and empty
// bodies answer 400 with a message saying what was wrong; a client that leaves a stream frees its
// slot at once and the batch it was alone in stops early.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>

#include "qkv/tasks/translator.h"
#include "serve_fixture.h"

using namespace qkv;
using namespace qkv_test;

namespace {

// The answer is a JSON error with this status whose message contains `what` (and, for a limit,
// whose code is the limit's name).
void expect_error(const Reply& r, int status, const std::string& what, const std::string& limit = "") {
  EXPECT_EQ(r.status, status) << r.body;
  ASSERT_TRUE(r.json.is_object() && r.json.contains("error")) << r.body;
  EXPECT_NE(error_message(r).find(what), std::string::npos) << "expected \"" << what << "\" in " << r.body;
  if (!limit.empty()) {
    EXPECT_EQ(r.json["error"]["code"], limit) << r.body;
    EXPECT_EQ(r.json["error"]["type"], "limit_exceeded") << r.body;
  }
}

// One HTTP exchange on an open connection: sends `req`, reads one answer (its headers and
// Content-Length bytes of body). Returns "" if the connection ends first.
std::string http_exchange(int fd, const std::string& req) {
  if (::send(fd, req.data(), req.size(), 0) != ssize_t(req.size())) return "";
  std::string got;
  char buf[4096];
  for (;;) {
    const size_t head = got.find("\r\n\r\n");
    if (head != std::string::npos) {
      const size_t cl = got.find("Content-Length: ");
      const size_t len = cl == std::string::npos ? 0 : std::stoul(got.substr(cl + 16));
      if (got.size() >= head + 4 + len) return got;
    }
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return "";
    got.append(buf, size_t(n));
  }
}

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return -1;
  return fd;
}

}  // namespace

// A request with neither Content-Length nor chunked Transfer-Encoding has no body (RFC 9112,
// 6.3): answered at once, as one with Content-Length: 0 is, and the connection goes on. cpp-httplib
// alone read such a body until its 5 s timeout and then answered "HTTP status 400". A
// Content-Length that is not digits is a 400 too (-5 waited 5 s for a 413).
TEST(ServeLimits, ARequestWithoutALengthHasNoBodyAndIsAnsweredAtOnce) {
  const auto& m = ServeModels::get();
  RunningServer s(m.all());
  const int fd = connect_to(s.port);
  ASSERT_GE(fd, 0);
  const auto t0 = std::chrono::steady_clock::now();
  std::string a = http_exchange(fd, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_NE(a.find("HTTP/1.1 400"), std::string::npos) << a;
  EXPECT_NE(a.find("/v1/completions: the request body is empty; expected a JSON object"), std::string::npos) << a;
  a = http_exchange(fd, "POST /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_NE(a.find("HTTP/1.1 404"), std::string::npos) << a;
  EXPECT_NE(a.find("no such endpoint: POST /health"), std::string::npos) << a;
  a = http_exchange(fd, "PUT /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_NE(a.find("no such endpoint: PUT /v1/completions"), std::string::npos) << a;
  // A chunked body is read as one, whatever the case of the coding's name.
  const std::string body = R"({"model": "gpt", "text": "the"})";
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  a = http_exchange(fd, "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: Chunked\r\n\r\n" +
                       std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n");
  EXPECT_NE(a.find("HTTP/1.1 200"), std::string::npos) << a;
  a = http_exchange(fd, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");  // the same connection
  EXPECT_NE(a.find("HTTP/1.1 200"), std::string::npos) << a;
  a = http_exchange(fd, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -5\r\n\r\n");
  EXPECT_NE(a.find("HTTP/1.1 400"), std::string::npos) << a;
  EXPECT_NE(a.find("Content-Length '-5' is not a byte count"), std::string::npos) << a;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4));  // no read timed out
  ::close(fd);
}

TEST(ServeLimits, EachLimitAnswersItsStatusAndNamesIt) {
  const auto& m = ServeModels::get();
  serve::ServerOptions opt;
  opt.limits.max_body_bytes = 2000;
  opt.limits.max_inputs = 3;
  opt.limits.max_input_tokens = 5;
  opt.limits.max_tokens = 10;
  opt.limits.max_beam = 4;
  RunningServer s(m.all(), opt);
  expect_error(request(s.port, "POST", "/v1/translate", "{\"text\": \"" + std::string(3000, 'a') + "\"}"), 413,
               "larger than 2000 bytes (--max-body-bytes)", "max_body_bytes");
  expect_error(post(s.port, "/v1/translate", {{"texts", nlohmann::json::array({"a", "b", "c", "d"})}}), 400,
               "4 inputs in \"texts\", more than 3 (--max-inputs)", "max_inputs");
  expect_error(post(s.port, "/v1/embeddings", {{"input", nlohmann::json::array({"the", "the user name error not found"})}}), 400,
               "input 1 of \"input\" has 6 tokens, more than 5 (--max-input-tokens)", "max_input_tokens");
  expect_error(post(s.port, "/v1/completions", {{"prompt", "the"}, {"max_tokens", 11}}), 400,
               "max_tokens 11 is more than 10 (--max-tokens)", "max_tokens");
  expect_error(post(s.port, "/v1/translate", {{"text", "the"}, {"max_length", 11}}), 400,
               "max_length 11 is more than 10 (--max-tokens)", "max_tokens");
  expect_error(post(s.port, "/v1/translate", {{"text", "the"}, {"beam", 5}}), 400,
               "field \"beam\": expected an integer in [1, 4], got the integer 5");
  // Below the lower bounds: 0 is refused like -1 (JSON's non-negative integers once skipped the check).
  expect_error(post(s.port, "/v1/translate", {{"text", "the"}, {"max_length", 0}}), 400,
               "field \"max_length\": expected an integer in [1, ");
  expect_error(post(s.port, "/v1/translate", {{"text", "the"}, {"beam", 0}}), 400,
               "field \"beam\": expected an integer in [1, 4], got the integer 0");
  expect_error(post(s.port, "/v1/completions", {{"prompt", "the"}, {"max_tokens", 0}}), 400,
               "field \"max_tokens\": expected an integer in [1, ");
  expect_error(post(s.port, "/v1/completions", {{"prompt", "the"}, {"n", 0}}), 400,
               "field \"n\": expected an integer in [1, 128], got the integer 0");
  expect_error(post(s.port, "/v1/completions", {{"prompt", {"the", "user"}}, {"n", 2}}), 400,
               "2 prompts times n 2 are more than 3 completions (--max-inputs)", "max_inputs");
  // A chunked body is held to the same limit: cpp-httplib 0.11 read one whole, past the limit (this
  // 40 kB request, 20 times --max-body-bytes, was answered 200; so was one of 100 MB). A small one
  // is answered.
  auto chunked = [&](const std::string& body) {
    httplib::Client c("127.0.0.1", s.port);
    bool sent = false;
    httplib::Result r = c.Post(
        "/v1/translate",
        [&](size_t, httplib::DataSink& sink) {  // no length given: cpp-httplib sends it chunked
          if (sent) {
            sink.done();
            return true;
          }
          sent = true;
          return sink.write(body.data(), body.size());
        },
        "application/json");
    if (!r) return Reply{};
    return Reply{r->status, r->body, nlohmann::json::parse(r->body, nullptr, false)};
  };
  expect_error(chunked("{\"text\": \"the\"}" + std::string(40000, ' ')), 413,
               "larger than 2000 bytes (--max-body-bytes)", "max_body_bytes");
  EXPECT_EQ(chunked("{\"text\": \"the\"}").status, 200);
  // At the limits, answers.
  EXPECT_EQ(post(s.port, "/v1/translate", {{"texts", nlohmann::json::array({"a", "b", "c"})}, {"max_length", 10}, {"beam", 4}}).status, 200);
  EXPECT_EQ(post(s.port, "/v1/completions", {{"prompt", "the user name error not"}, {"max_tokens", 10}}).status, 200);
}

TEST(ServeLimits, ConcurrentRequestsAndQueueLengthAnswer429) {
  const auto& m = ServeModels::get();
  serve::ServerOptions opt;
  opt.limits.max_concurrent = 2;
  opt.limits.max_queue = 3;
  opt.batch.max_wait = std::chrono::milliseconds(5000);  // a queued request waits for company
  opt.batch.max_batch = 64;
  RunningServer s(m.all(), opt);
  // Two texts wait in mt's queue (5 s for company); a third and fourth text would pass 3.
  Reply first;
  std::thread a([&] { first = post(s.port, "/v1/translate", {{"texts", nlohmann::json::array({"the file", "the user"})}}); });
  ASSERT_TRUE(wait_metric(s.port, "qkv_queue_length{model=\"mt\"}", 2));
  expect_error(post(s.port, "/v1/translate", {{"texts", nlohmann::json::array({"save", "print"})}}), 429,
               "the queue of model 'mt' is full (3 inputs, --max-queue)", "max_queue");
  // One more request in flight makes two: the next one is refused.
  Reply second;
  std::thread b([&] { second = post(s.port, "/v1/translate", {{"text", "save"}}); });
  ASSERT_TRUE(wait_metric(s.port, "qkv_requests_in_flight", 2));
  expect_error(post(s.port, "/v1/embeddings", {{"input", "x"}}), 429,
               "answering 2 requests already (--max-concurrent)", "max_concurrent");
  a.join();
  b.join();
  EXPECT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(first.json["translations"].size(), 2u);
  // /health and /metrics are not limited.
  EXPECT_EQ(request(s.port, "GET", "/health").status, 200);
}

TEST(ServeLimits, BadInputAnswers400WithAMessage) {
  const auto& m = ServeModels::get();
  RunningServer s(m.all());
  auto raw = [&](const std::string& path, const std::string& body) { return request(s.port, "POST", path, body); };
  expect_error(raw("/v1/translate", ""), 400, "the request body is empty; expected a JSON object");
  expect_error(raw("/v1/translate", "  \n"), 400, "the request body is empty");
  expect_error(raw("/v1/translate", "{\"text\": \"the file\""), 400, "the request body is not valid JSON");
  expect_error(raw("/v1/translate", "[\"the file\"]"), 400, "expected a JSON object, got an array");
  expect_error(raw("/v1/translate", "{\"text\": \"the \xff file\"}"), 400, "not valid UTF-8");
  expect_error(raw("/v1/completions", "{\"prompt\": \"the\", \"max_tokens\": 1e400}"), 400,
               "the request body is not valid JSON");  // beyond double: the parser's number overflow
  expect_error(raw("/v1/completions", "{\"prompt\": \"the\", \"max_tokens\": 99999999999999999999999}"), 400,
               "field \"max_tokens\": expected an integer in [1, 9223372036854775807], got the number 9.999999999999999e+22");
  expect_error(raw("/v1/completions", "{\"prompt\": \"the\", \"max_tokens\": 18446744073709551615}"), 400,
               "field \"max_tokens\": expected an integer in [1, 9223372036854775807], got the integer 18446744073709551615");
  expect_error(raw("/v1/completions", "{\"prompt\": \"the\", \"seed\": -1}"), 400, "field \"seed\": expected an integer in [0");
  expect_error(post(s.port, "/v1/translate", {{"text", 3}}), 400, "field \"text\": expected a string, got the integer 3");
  expect_error(post(s.port, "/v1/translate", {{"texts", nlohmann::json::array({"a", 2})}}), 400, "field \"texts\" element 1: expected a string, got the integer 2");
  expect_error(post(s.port, "/v1/translate", {{"text", "a"}, {"beam", 2.5}}), 400, "field \"beam\": expected an integer in [1, 16], got the number 2.5");
  expect_error(post(s.port, "/v1/translate", {{"text", "a"}, {"colour", "red"}}), 400,
               "unknown field \"colour\" (this endpoint takes model, text, texts, beam");
  expect_error(post(s.port, "/v1/translate", {{"text", "a"}, {"texts", nlohmann::json::array({"b"})}}), 400, "give exactly one of \"text\"");
  expect_error(post(s.port, "/v1/translate", nlohmann::json::object()), 400, "give exactly one of \"text\"");
  expect_error(post(s.port, "/v1/completions", {{"prompt", "a"}, {"temperature", "hot"}}), 400,
               "field \"temperature\": expected a number in [0, 100], got a string");
  expect_error(post(s.port, "/v1/completions", {{"prompt", "a"}, {"stream", "yes"}}), 400,
               "field \"stream\": expected true or false, got a string");
  expect_error(post(s.port, "/v1/completions", {{"prompt", nlohmann::json::array()}}), 400,
               "field \"prompt\": expected a string or a non-empty array of strings");
  expect_error(post(s.port, "/v1/completions", {{"prompt", "a"}, {"presence_penalty", 2.5}}), 400,
               "field \"presence_penalty\": expected a number in [-2, 2], got the number 2.5");
  expect_error(post(s.port, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 4}, {"min_tokens", 5}}), 400,
               "field \"min_tokens\": expected an integer in [0, 4], got the integer 5");
  expect_error(post(s.port, "/v1/completions", {{"prompt", "a"}, {"n", 129}}), 400,
               "field \"n\": expected an integer in [1, 128]");
  expect_error(post(s.port, "/v1/completions", {{"prompt", "a"}, {"top_p", 0}}), 400,
               "\"top_p\": expected a number in (0, 1], got the integer 0");
  expect_error(post(s.port, "/v1/completions", {{"prompt", "a"}, {"top_p", 1.5}}), 400,
               "\"top_p\": expected a number in (0, 1], got the number 1.5");  // the range, not [0, 1]
  expect_error(post(s.port, "/v1/embeddings", {{"input", "a"}, {"encoding_format", "base64"}}), 400,
               "only \"float\" is supported");
  expect_error(post(s.port, "/v1/translate", {{"model", "gpt"}, {"text", "a"}}), 400,
               "model 'gpt' is a generation model; this endpoint needs a translation model");
  expect_error(request(s.port, "GET", "/v1/translate"), 404, "no such endpoint: GET /v1/translate");
  // Beyond a model's own context (the limit allows it, the model does not): a 400 naming it.
  const std::string long_text = "the the the the the the the the the the the the the the the the";
  expect_error(post(s.port, "/v1/translate", {{"text", long_text}}), 400,
               "input 0 of \"text\" has more than 15 tokens, the model's maximum (\"truncate\": true cuts it)");
  // /v1/score the same way, naming the side (it answered the library's own "score: pair 2: ...",
  // counted from 1, with no field).
  Reply sc = post(s.port, "/v1/score", {{"sources", {"the file", "save"}}, {"targets", {"die datei", long_text}}});
  expect_error(sc, 400, "/v1/score: input 1 of \"targets\" has more than 15 tokens, the model's maximum");
  EXPECT_EQ(sc.json["error"]["param"], "targets") << sc.body;
  sc = post(s.port, "/v1/score", {{"source", long_text}, {"target", "die datei"}});
  expect_error(sc, 400, "/v1/score: input 0 of \"source\" has more than 15 tokens");
  sc = post(s.port, "/v1/score", {{"source", long_text}, {"target", "die datei"}, {"truncate", true}});
  ASSERT_EQ(sc.status, 200) << sc.body;
  EXPECT_EQ(sc.json["scores"][0]["truncated"], true) << sc.body;
  Reply cut = post(s.port, "/v1/translate", {{"texts", {"the file", long_text, "save"}}, {"truncate", true}});
  ASSERT_EQ(cut.status, 200) << cut.body;
  EXPECT_EQ(cut.json["truncated"], 1);
  tasks::TranslateOptions o;
  o.quiet = true;
  EXPECT_EQ(cut.json["translations"].get<std::vector<std::string>>(),
            tasks::Translator(m.translation).translate({"the file", long_text, "save"}, o).text);
  std::string long_prompt;
  for (int i = 0; i < 32; ++i) long_prompt += "the ";
  expect_error(post(s.port, "/v1/completions", {{"prompt", long_prompt}}), 400,
               "prompt 0 has 32 tokens; the model's context holds 32");
  // The server is still up and right after all that.
  EXPECT_EQ(post(s.port, "/v1/translate", {{"text", "the file"}}).status, 200);
}

TEST(ServeLimits, AClientLeavingAStreamFreesItsSlotAndStopsItsBatch) {
  // A GPT slow enough that 1000 tokens take far longer than the test waits (no eos token in its
  // vocabulary, so only the length ends it).
  const std::string dir = scratch_dir("serve_stream_leave");
  io::GptBundle b = tiny_gpt(1024, 41);
  b.tokenizer = word_tokenizer({"<unk>", "<pad>"});
  b.config.n_embd = 256, b.config.n_layer = 6, b.config.n_head = 4;
  b.model = std::make_shared<models::Gpt>(b.config);
  io::save_gpt2(dir + "/gpt", b);
  serve::ServerOptions opt;
  opt.limits.max_concurrent = 1;
  opt.limits.max_tokens = 1000;
  RunningServer s({{"gpt", dir + "/gpt"}}, opt);

  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(s.port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string body = R"({"prompt": "the file", "max_tokens": 1000, "temperature": 0, "stream": true})";
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(::send(fd, req.data(), req.size(), 0), ssize_t(req.size()));
  std::string got;
  char buf[4096];
  while (got.find("data: ") == std::string::npos) {  // the first event: the stream is running
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 0) << got;
    got.append(buf, size_t(n));
  }
  ASSERT_NE(got.find("200 OK"), std::string::npos) << got;
  ::close(fd);
  const auto left = std::chrono::steady_clock::now();
  // Its slot comes back (the only one): a new request is answered, not refused with 429.
  Reply r;
  do {
    r = post(s.port, "/tokenize", {{"text", "the"}});
  } while (r.status == 429 && std::chrono::steady_clock::now() - left < std::chrono::seconds(20));
  EXPECT_EQ(r.status, 200) << r.body;
  // ... and the generation stopped: a one-token request queued behind it is answered, and the
  // model's token count is that one token (a call that ran to its end would have added 1000).
  r = post(s.port, "/v1/completions", {{"prompt", "the"}, {"max_tokens", 1}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["usage"]["completion_tokens"], 1);
  const std::string t = request(s.port, "GET", "/metrics").body;
  EXPECT_EQ(metric(t, "qkv_tokens_total{model=\"gpt\"}"), 1) << t;
}
