#include "qkv/util/file.h"

#include <fcntl.h>
#include <sys/file.h>
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

AtomicWriter::AtomicWriter(std::string path) : path_(std::move(path)) {
  tmp_ = path_ + ".tmp." + std::to_string(::getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  QKV_CHECK(fd_ >= 0, path_, "cannot create temporary file ", tmp_, ": ", std::strerror(errno));
}

AtomicWriter::~AtomicWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicWriter::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    QKV_CHECK(w > 0, path_, "write failed (", w < 0 ? std::strerror(errno) : "no progress",
              "); the previous file, if any, is unchanged");
    p += w;
    n -= size_t(w);
  }
}

void AtomicWriter::commit() {
  QKV_CHECK(::fsync(fd_) == 0, path_, "fsync failed: ", std::strerror(errno));
  QKV_CHECK(::close(fd_) == 0, path_, "close failed: ", std::strerror(errno));
  fd_ = -1;
  QKV_CHECK(::rename(tmp_.c_str(), path_.c_str()) == 0, path_, "rename from ", tmp_, " failed: ", std::strerror(errno));
  committed_ = true;
  std::string dir = std::filesystem::path(path_).parent_path().string();
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
