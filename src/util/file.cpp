#include "qkv/util/file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "qkv/util/error.h"

namespace qkv {

std::string read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  QKV_CHECK(fd >= 0, path, "cannot open for reading: ", std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      fail(path, "read failed at offset ", out.size(), ": ", std::strerror(e));
    }
    if (n == 0) break;
    out.append(buf, size_t(n));
  }
  ::close(fd);
  return out;
}

namespace {

// The file a symlink chain ends at, as a path (the link itself when it leads nowhere yet, e.g. a
// dangling link to a file to be created: its target, followed as far as it goes).
std::string follow_symlinks(std::string path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (int hops = 0; hops < 40; ++hops) {
    if (!fs::is_symlink(path, ec)) return path;
    const fs::path target = fs::read_symlink(path, ec);
    if (ec) return path;
    path = (target.is_absolute() ? target : fs::path(path).parent_path() / target).string();
  }
  fail(path, "too many levels of symbolic links");
}

// N for /dev/stdout (1), /dev/stderr (2), /dev/fd/N and /proc/self/fd/N; else -1. These are the
// process's own descriptors: written through a duplicate, so that an append redirection appends.
int own_descriptor(const std::string& path) {
  if (path == "/dev/stdout") return 1;
  if (path == "/dev/stderr") return 2;
  for (const char* prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    const std::string pre(prefix);
    if (path.size() <= pre.size() || path.compare(0, pre.size(), pre) != 0 || path.size() > pre.size() + 6) continue;
    int n = 0;
    for (size_t i = pre.size(); i < path.size(); ++i) {
      if (path[i] < '0' || path[i] > '9') return -1;
      n = n * 10 + (path[i] - '0');
    }
    return n;
  }
  return -1;
}

}  // namespace

AtomicWriter::AtomicWriter(std::string path) : path_(std::move(path)) {
  if (const int own = own_descriptor(path_); own >= 0) {
    fd_ = ::fcntl(own, F_DUPFD_CLOEXEC, 0);
    QKV_CHECK(fd_ >= 0, path_, "cannot write: descriptor ", own, " is not open (", std::strerror(errno), ")");
    in_place_ = true;
    return;
  }
  // A device, FIFO or socket (/dev/stdout, a pipe, /dev/null) is written in place: renaming over
  // it would replace the node with a file. Atomicity means nothing for a stream.
  struct stat st;
  if (::stat(path_.c_str(), &st) == 0) {
    QKV_CHECK(!S_ISDIR(st.st_mode), path_, "is a directory; expected a file to write");
    if (!S_ISREG(st.st_mode)) {
      fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
      QKV_CHECK(fd_ >= 0, path_, "cannot open for writing: ", std::strerror(errno));
      in_place_ = true;
      return;
    }
  }
  // A regular file behind a symlink: the file is replaced, the link kept.
  target_ = follow_symlinks(path_);
  tmp_ = target_ + ".tmp." + std::to_string(::getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  QKV_CHECK(fd_ >= 0, path_, "cannot create temporary file ", tmp_, ": ", std::strerror(errno));
}

AtomicWriter::~AtomicWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !in_place_) ::unlink(tmp_.c_str());
}

void AtomicWriter::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    QKV_CHECK(w > 0, path_, "write failed (", w < 0 ? std::strerror(errno) : "no progress", ")",
              in_place_ ? "" : "; the previous file, if any, is unchanged");
    p += w;
    n -= size_t(w);
  }
}

void AtomicWriter::commit() {
  if (in_place_) {
    QKV_CHECK(::close(fd_) == 0, path_, "close failed: ", std::strerror(errno));
    fd_ = -1;
    committed_ = true;
    return;
  }
  QKV_CHECK(::fsync(fd_) == 0, path_, "fsync failed: ", std::strerror(errno));
  QKV_CHECK(::close(fd_) == 0, path_, "close failed: ", std::strerror(errno));
  fd_ = -1;
  QKV_CHECK(::rename(tmp_.c_str(), target_.c_str()) == 0, path_, "rename from ", tmp_, " failed: ",
            std::strerror(errno));
  committed_ = true;
  std::string dir = std::filesystem::path(target_).parent_path().string();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_file_atomic(const std::string& path, const std::string& contents) {
  AtomicWriter w(path);
  w.write(contents);
  w.commit();
}

FileLock::FileLock(const std::string& path) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  QKV_CHECK(fd_ >= 0, path, "cannot open lock file: ", std::strerror(errno));
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int e = errno;
    ::close(fd_);
    fail(path, "cannot lock: ", std::strerror(e));
  }
}

FileLock::~FileLock() { ::close(fd_); }  // closing releases the lock

}  // namespace qkv
