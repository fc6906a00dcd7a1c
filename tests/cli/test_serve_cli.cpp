// `qkv serve` as a process: --port 0 prints the port it chose; one log line per request (id,
// endpoint, status, tokens, ms); SIGTERM stops accepting, lets the request in flight finish with
// its answer, and exits 0; a model directory that is not one fails at start naming it.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "qkv/io/model_dir.h"
#include "qkv/tasks/translator.h"
#include "qkv/util/file.h"
#include "run_qkv.h"
#include "scratch_util.h"
#include "tiny_models.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

// Waits for "listening on http://127.0.0.1:PORT" in the log; returns the port (0 if the process
// ended or 60 s passed).
int wait_port(const std::string& log, pid_t pid) {
  const std::regex re("listening on http://127\\.0\\.0\\.1:([0-9]+)");
  for (int i = 0; i < 6000; ++i) {
    std::smatch m;
    const std::string text = std::filesystem::exists(log) ? read_file(log) : "";
    if (std::regex_search(text, m, re)) return std::stoi(m[1]);
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

}  // namespace

TEST(ServeCli, SigtermDrainsTheRequestInFlightAndExitsZero) {
  const std::string dir = qkv_test::scratch_dir("serve_cli");
  io::save_seq2seq(dir + "/mt", qkv_test::tiny_translation_model(51, 16));
  // A request waits 3 s in the queue for company: SIGTERM arrives while it is in flight.
  const pid_t pid = spawn({qkv_bin(), "serve", "--model", "de=" + dir + "/mt", "--port", "0", "--max-wait-ms", "3000"},
                          dir + "/log.txt");
  const int port = wait_port(dir + "/log.txt", pid);
  ASSERT_GT(port, 0) << read_file(dir + "/log.txt");

  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(30, 0);
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  int status = 0;  // 0: no answer
  std::string body, error;
  std::thread client([&] {
    httplib::Client c2("127.0.0.1", port);
    c2.set_read_timeout(30, 0);
    auto r = c2.Post("/v1/translate", R"({"texts": ["cannot open the file", "the user"]})", "application/json");
    if (r) status = r->status, body = r->body;
    else error = httplib::to_string(r.error());
  });
  // SIGTERM once the server counts the request in flight (it then waits in the queue).
  bool queued = false;
  for (int i = 0; i < 4000 && !queued; ++i) {
    auto m = c.Get("/metrics");
    queued = m && m->body.find("\nqkv_requests_in_flight 1\n") != std::string::npos;
    if (!queued) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(queued) << "the request never showed in flight";
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  client.join();
  EXPECT_EQ(wait_exit(pid), 0) << read_file(dir + "/log.txt");
  ASSERT_EQ(status, 200) << body << error;
  tasks::Translator lib(dir + "/mt");
  EXPECT_EQ(nlohmann::json::parse(body)["translations"].get<std::vector<std::string>>(),
            lib.translate({"cannot open the file", "the user"}).text);
  // After the drain nothing listens.
  httplib::Client after("127.0.0.1", port);
  after.set_connection_timeout(2, 0);
  EXPECT_FALSE(after.Get("/health"));

  const std::string log = read_file(dir + "/log.txt");
  EXPECT_NE(log.find("SIGTERM: no new requests; draining 1 in flight"), std::string::npos) << log;
  EXPECT_TRUE(std::regex_search(log, std::regex("qkv serve: #1 GET /health 200 tokens=0 [0-9.]+ ms"))) << log;
  EXPECT_TRUE(std::regex_search(log, std::regex("qkv serve: #[0-9]+ POST /v1/translate 200 tokens=[1-9][0-9]* [0-9.]+ ms")))
      << log;
  EXPECT_NE(log.find("qkv serve: stopped"), std::string::npos) << log;
}

TEST(ServeCli, ABadModelDirectoryFailsAtStartNamingIt) {
  const std::string dir = qkv_test::scratch_dir("serve_cli_bad");
  EXPECT_EQ(run_qkv({"serve", "--model", dir + "/none", "--port", "0"}, dir + "/log.txt"), 1);
  EXPECT_NE(read_file(dir + "/log.txt").find(dir + "/none: no such directory"), std::string::npos)
      << read_file(dir + "/log.txt");
  std::filesystem::create_directories(dir + "/m");
  write_file_atomic(dir + "/m/config.json", R"({"model_type": "lstm"})");
  EXPECT_EQ(run_qkv({"serve", "--model", dir + "/m", "--port", "0"}, dir + "/log2.txt"), 1);
  EXPECT_NE(read_file(dir + "/log2.txt").find("model_type': expected transformer, rnn, gpt2 or bert"), std::string::npos)
      << read_file(dir + "/log2.txt");
}
