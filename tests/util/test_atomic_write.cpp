// AtomicWriter: a regular file is replaced by rename (no temporary left), a symlink keeps pointing
// at the file it names, and what is not a regular file (a FIFO, the process's own descriptors) is
// written in place, never renamed over: `-o /dev/stdout` once replaced the node with a plain file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "qkv/util/error.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::path(::testing::TempDir()) / (name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string read_all(int fd) {
  std::string out;
  char buf[256];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  return out;
}

}  // namespace

TEST(AtomicWrite, ReplacesARegularFileAndLeavesNoTemporary) {
  const fs::path d = fresh_dir("qkv_atomic_regular");
  qkv::write_file_atomic((d / "f.txt").string(), "old");
  qkv::write_file_atomic((d / "f.txt").string(), "new contents");
  EXPECT_EQ(qkv::read_file((d / "f.txt").string()), "new contents");
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);
  fs::remove_all(d);
}

TEST(AtomicWrite, ASymlinkStaysALinkAndItsFileIsReplaced) {
  const fs::path d = fresh_dir("qkv_atomic_link");
  fs::create_directories(d / "real");
  qkv::write_file_atomic((d / "real/f.txt").string(), "old");
  fs::create_symlink("real/f.txt", d / "link");
  fs::create_symlink("real/g.txt", d / "dangling");  // a link to a file not made yet
  qkv::write_file_atomic((d / "link").string(), "through the link");
  qkv::write_file_atomic((d / "dangling").string(), "created");
  EXPECT_TRUE(fs::is_symlink(d / "link"));
  EXPECT_TRUE(fs::is_symlink(d / "dangling"));
  EXPECT_EQ(qkv::read_file((d / "real/f.txt").string()), "through the link");
  EXPECT_EQ(qkv::read_file((d / "real/g.txt").string()), "created");
  EXPECT_EQ(std::distance(fs::directory_iterator(d / "real"), fs::directory_iterator()), 2);  // no temporaries
  fs::remove_all(d);
}

TEST(AtomicWrite, AFifoIsWrittenInPlace) {
  const fs::path d = fresh_dir("qkv_atomic_fifo");
  const std::string fifo = (d / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // a reader, so that the writer's open returns
  ASSERT_GE(reader, 0);
  qkv::write_file_atomic(fifo, "down the pipe\n");
  EXPECT_EQ(read_all(reader), "down the pipe\n");
  ::close(reader);
  struct stat st;
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);
  fs::remove_all(d);
}

TEST(AtomicWrite, OwnDescriptorsAreWrittenThroughAndAppendAppends) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  qkv::write_file_atomic("/dev/fd/" + std::to_string(p[1]), "via /dev/fd");
  ::close(p[1]);
  EXPECT_EQ(read_all(p[0]), "via /dev/fd");
  ::close(p[0]);

  // /proc/self/fd/N of a file opened for appending (as `>> file` opens stdout): appended to, not replaced.
  const fs::path d = fresh_dir("qkv_atomic_fd");
  const std::string file = (d / "log.txt").string();
  qkv::write_file_atomic(file, "first\n");
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  qkv::write_file_atomic("/proc/self/fd/" + std::to_string(fd), "second\n");
  ::close(fd);
  EXPECT_EQ(qkv::read_file(file), "first\nsecond\n");
  fs::remove_all(d);
}

TEST(AtomicWrite, ADirectoryOrAClosedDescriptorIsAClearError) {
  const fs::path d = fresh_dir("qkv_atomic_dir");
  try {
    qkv::write_file_atomic(d.string(), "x");
    FAIL() << "writing over a directory was accepted";
  } catch (const qkv::Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_directory(d));
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  ::close(p[0]);
  ::close(p[1]);
  try {
    qkv::write_file_atomic("/dev/fd/" + std::to_string(p[1]), "x");
    FAIL() << "a closed descriptor was accepted";
  } catch (const qkv::Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not open"), std::string::npos) << e.what();
  }
  fs::remove_all(d);
}
