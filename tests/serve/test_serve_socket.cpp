// qkv serve's listening socket: a port another server holds is a bind error (cpp-httplib's default
// SO_REUSEPORT let a second server share it), and a burst of connections fits the accept queue
// (cpp-httplib's queue of 5 dropped SYNs, and those clients waited out retransmits of 1 s and more).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "helpers.h"
#include "serve_fixture.h"

using namespace qkv;
using namespace qkv_test;

namespace {

// The kernel's count of connections this network namespace's listening sockets dropped for a full
// accept queue (TcpExt ListenOverflows, /proc/net/netstat; -1 if it cannot be read).
int64_t listen_overflows() {
  std::ifstream in("/proc/net/netstat");
  std::string names, values;
  while (std::getline(in, names) && std::getline(in, values)) {
    if (names.rfind("TcpExt:", 0) != 0) continue;
    std::istringstream n(names), v(values);
    std::string name, value;
    while (n >> name && v >> value)
      if (name == "ListenOverflows") return std::stoll(value);
  }
  return -1;
}

}  // namespace

TEST(ServeSocket, APortAnotherServerHoldsIsABindError) {
  const auto& m = ServeModels::get();
  RunningServer first({{"mt", m.translation}});
  serve::ServerOptions opt;
  opt.host = "127.0.0.1";
  opt.port = first.port;
  opt.log = false;
  serve::Server second({{"mt", m.translation}}, opt);
  EXPECT_MENTIONS(qkv::testing::error_of([&] { second.bind(); }),
                  "cannot listen on 127.0.0.1:" + std::to_string(first.port));
}

// 256 connects sent at once, before the server can accept them one by one: none is dropped.
TEST(ServeSocket, ABurstOfConnectionsFitsTheAcceptQueue) {
  const int64_t before = listen_overflows();
  if (before < 0) GTEST_SKIP() << "/proc/net/netstat has no TcpExt ListenOverflows";
  RunningServer server({{"mt", ServeModels::get().translation}});
  constexpr int kConnections = 256;
  std::vector<pollfd> fds;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(server.port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < kConnections; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ASSERT_GE(fd, 0);
    const int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ASSERT_TRUE(rc == 0 || errno == EINPROGRESS) << std::strerror(errno);
    fds.push_back({fd, POLLOUT, 0});
  }
  for (pollfd& p : fds) {  // every handshake done (a dropped one would take a 1 s retransmit)
    ASSERT_EQ(::poll(&p, 1, 10000), 1);
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    EXPECT_EQ(err, 0) << std::strerror(err);
  }
  for (pollfd& p : fds) ::close(p.fd);
  EXPECT_EQ(listen_overflows(), before) << "connections dropped for a full accept queue";
}
