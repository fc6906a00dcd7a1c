#include "qkv/text/line_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "qkv/util/error.h"

namespace qkv::text {

LineReader::LineReader(const std::string& path, size_t buffer_bytes, uint64_t start_offset)
    : path_(path), buf_(std::max<size_t>(buffer_bytes, 16)), offset_(start_offset) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  QKV_CHECK(fd_ >= 0, "LineReader '" + path + "'", "cannot open: ", std::strerror(errno));
  if (start_offset > 0 && ::lseek(fd_, off_t(start_offset), SEEK_SET) < 0) {
    int err = errno;
    ::close(fd_);
    fail("LineReader '" + path + "'", "cannot seek to byte ", start_offset, ": ", std::strerror(err));
  }
}

LineReader::~LineReader() {
  if (fd_ >= 0) ::close(fd_);
}

// Moves unread bytes to the front (growing the buffer if it is full) and reads more.
bool LineReader::fill() {
  if (eof_) return false;
  if (begin_ > 0) {
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);  // one line longer than the buffer
  ssize_t n;
  do {
    n = ::read(fd_, buf_.data() + end_, buf_.size() - end_);
  } while (n < 0 && errno == EINTR);
  QKV_CHECK(n >= 0, "LineReader '" + path_ + "'", "read error at byte ", offset_ + (end_ - begin_),
            ": ", std::strerror(errno));
  if (n == 0) {
    eof_ = true;
    return false;
  }
  end_ += size_t(n);
  return true;
}

bool LineReader::next(std::string_view& line) {
  size_t scanned = begin_;
  for (;;) {
    const char* nl = static_cast<const char*>(std::memchr(buf_.data() + scanned, '\n', end_ - scanned));
    if (nl) {
      size_t len = size_t(nl - (buf_.data() + begin_));
      line = std::string_view(buf_.data() + begin_, len);
      begin_ += len + 1;
      offset_ += len + 1;
      break;
    }
    size_t consumed = begin_;
    scanned = end_;
    if (!fill()) {
      if (begin_ == end_) return false;
      line = std::string_view(buf_.data() + begin_, end_ - begin_);  // last line, no "\n"
      offset_ += end_ - begin_;
      begin_ = end_;
      break;
    }
    scanned -= consumed;  // fill() shifted the data to the front
  }
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  ++line_no_;
  return true;
}

std::vector<std::string_view> split_tabs(std::string_view line) {
  std::vector<std::string_view> out;
  size_t b = 0;
  for (;;) {
    size_t t = line.find('\t', b);
    if (t == std::string_view::npos) {
      out.push_back(line.substr(b));
      return out;
    }
    out.push_back(line.substr(b, t - b));
    b = t + 1;
  }
}

}  // namespace qkv::text
