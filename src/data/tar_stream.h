// Private: incremental reader of a POSIX/GNU tar stream (as produced by dpkg-deb --fsys-tarfile).
// Regular files whose path passes `want` are collected whole and handed to `on_file`; everything
// else is skipped without buffering. Handles GNU long names ('L') and pax 'path' records ('x').
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace qkv::data::detail {

class TarStream {
 public:
  using Want = std::function<bool(const std::string& path)>;
  using OnFile = std::function<void(const std::string& path, std::string&& data)>;
  TarStream(std::string source, Want want, OnFile on_file)
      : source_(std::move(source)), want_(std::move(want)), on_file_(std::move(on_file)) {}
  void feed(const char* p, size_t n);
  // Throws qkv::Error if the stream ended inside an entry.
  void finish() const;

 private:
  void on_header();
  void on_body_done();
  enum class State { Header, Body, Padding, End } state_ = State::Header;
  std::string source_;
  Want want_;
  OnFile on_file_;
  std::string header_;          // partial 512-byte header
  std::string body_;            // collected body (wanted files, long names, pax records)
  uint64_t remaining_ = 0;      // bytes left in the current body
  uint64_t padding_ = 0;        // bytes left in the padding after the body
  char type_ = 0;
  bool keep_ = false;
  std::string path_, long_name_;
  uint64_t offset_ = 0;         // stream position, for messages
};

}  // namespace qkv::data::detail
