// qkv/util/file.h - checked file I/O. Every read and write is checked; errors name the file.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace qkv {

// Reads a whole file; throws qkv::Error naming the path on any failure.
std::string read_file(const std::string& path);

// Atomic write: the data goes to "<path>.tmp.<pid>", is fsync'ed, then renamed over `path`
// (and the directory fsync'ed). On any failure (full disk included) the temporary is removed,
// the old `path` is untouched, and qkv::Error names the path and the errno text. A symlink to a
// file stays a symlink (the file it names is replaced); a device, FIFO or socket (/dev/stdout, a
// pipe) is written in place, since renaming over it would replace the node with a plain file.
class AtomicWriter {
 public:
  explicit AtomicWriter(std::string path);
  ~AtomicWriter();  // removes the temporary if commit() was not reached
  AtomicWriter(const AtomicWriter&) = delete;
  AtomicWriter& operator=(const AtomicWriter&) = delete;
  void write(const void* data, size_t n);
  void write(const std::string& s) { write(s.data(), s.size()); }
  void commit();

 private:
  std::string path_, target_, tmp_;  // as given; the file it names after symlinks; the temporary
  int fd_ = -1;
  bool committed_ = false, in_place_ = false;
};

void write_file_atomic(const std::string& path, const std::string& contents);

// An exclusive advisory lock (flock) on `path`, created if missing, held until destruction:
// processes that fill a shared cache (downloads) take it so that two runs at once, e.g. tests in
// parallel on a fresh machine, neither download the same file twice nor read a half-written one.
class FileLock {
 public:
  explicit FileLock(const std::string& path);  // blocks until the lock is free
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace qkv
