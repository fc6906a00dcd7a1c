// qkv/text/line_reader.h - streaming line reader for files larger than memory. Holds one buffer
// (grown only if a single line is longer); never loads the whole file.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qkv::text {

class LineReader {
 public:
  // Opens `path` and positions at byte `start_offset` (which must be the start of a line, e.g.
  // a value of offset() saved earlier). Throws qkv::Error naming the file.
  explicit LineReader(const std::string& path, size_t buffer_bytes = size_t(1) << 20,
                      uint64_t start_offset = 0);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Next line without its "\n" (and without a trailing "\r"); false at end of file. The view
  // stays valid until the next call.
  bool next(std::string_view& line);
  // Byte offset of the start of the line that next() returns next.
  uint64_t offset() const { return offset_; }
  // 1-based number of the line last returned (counted from start_offset).
  uint64_t line_number() const { return line_no_; }
  size_t buffer_capacity() const { return buf_.size(); }

 private:
  bool fill();
  std::string path_;
  int fd_ = -1;
  std::vector<char> buf_;
  size_t begin_ = 0, end_ = 0;  // unread bytes are buf_[begin_, end_)
  bool eof_ = false;
  uint64_t offset_ = 0, line_no_ = 0;
};

// Reads one "a\tb..." line into fields split at tabs (views into line).
std::vector<std::string_view> split_tabs(std::string_view line);

}  // namespace qkv::text
