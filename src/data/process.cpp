#include "process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "qkv/util/error.h"

namespace qkv::data::detail {

std::string command_line(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s.size() > 300 ? s.substr(0, 300) + " ..." : s;
}

ProcessResult run_process(const std::vector<std::string>& argv, const std::string& cwd,
                          const std::function<void(const char*, size_t)>& on_stdout) {
  QKV_CHECK(!argv.empty(), "run_process", "empty command");
  int out[2], err[2];
  QKV_CHECK(pipe(out) == 0 && pipe(err) == 0, "run_process", "pipe: ", std::strerror(errno));
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  QKV_CHECK(pid >= 0, "run_process", "fork for '", argv[0], "': ", std::strerror(errno));
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]);
    close(out[1]);
    close(err[0]);
    close(err[1]);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    execvp(args[0], args.data());
    const char msg[] = "exec failed\n";
    [[maybe_unused]] auto n = write(2, msg, sizeof msg - 1);
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  ProcessResult r;
  std::vector<char> buf(1 << 16);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(fds[i].fd, buf.data(), buf.size());
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else if (i == 0) {
        try {
          if (on_stdout) on_stdout(buf.data(), size_t(n));
        } catch (...) {  // stop the child, reap it, and pass the error on
          kill(pid, SIGKILL);
          for (auto& f : fds)
            if (f.fd >= 0) close(f.fd);
          int st = 0;
          while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
          }
          throw;
        }
      } else {
        r.err.append(buf.data(), size_t(n));
        if (r.err.size() > (1 << 16)) r.err.erase(0, r.err.size() - (1 << 16));
      }
    }
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

static void check_ok(const std::vector<std::string>& argv, const ProcessResult& r) {
  if (r.status == 0) return;
  std::string hint = r.status == 127 ? " (is '" + argv[0] + "' installed?)" : "";
  fail("command '" + command_line(argv) + "'", "exited with status ", r.status, hint,
       r.err.empty() ? "" : ": ", r.err);
}

std::string run_capture(const std::vector<std::string>& argv, const std::string& cwd) {
  std::string out;
  auto r = run_process(argv, cwd, [&](const char* p, size_t n) { out.append(p, n); });
  check_ok(argv, r);
  return out;
}

void run_streaming(const std::vector<std::string>& argv,
                   const std::function<void(const char*, size_t)>& on_stdout,
                   const std::string& cwd) {
  check_ok(argv, run_process(argv, cwd, on_stdout));
}

}  // namespace qkv::data::detail
