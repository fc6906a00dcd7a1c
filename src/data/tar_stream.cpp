#include "tar_stream.h"

#include <algorithm>

#include "qkv/util/error.h"

namespace qkv::data::detail {
namespace {

uint64_t parse_octal(const char* p, size_t n, const std::string& where) {
  if (static_cast<unsigned char>(p[0]) & 0x80) {  // GNU base-256 for large sizes
    uint64_t v = static_cast<unsigned char>(p[0]) & 0x7f;
    for (size_t i = 1; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
    return v;
  }
  uint64_t v = 0;
  size_t i = 0;
  while (i < n && (p[i] == ' ' || p[i] == '\0')) ++i;
  for (; i < n && p[i] >= '0' && p[i] <= '7'; ++i) v = v * 8 + uint64_t(p[i] - '0');
  for (; i < n; ++i)
    QKV_CHECK(p[i] == ' ' || p[i] == '\0', where, "bad octal field in tar header");
  return v;
}

std::string field(const char* p, size_t n) { return std::string(p, std::find(p, p + n, '\0')); }

}  // namespace

void TarStream::feed(const char* p, size_t n) {
  while (n > 0) {
    switch (state_) {
      case State::End:
        return;  // trailing zero blocks / garbage after the end marker
      case State::Header: {
        size_t take = std::min(n, 512 - header_.size());
        header_.append(p, take);
        p += take, n -= take, offset_ += take;
        if (header_.size() == 512) on_header();
        break;
      }
      case State::Body: {
        size_t take = size_t(std::min<uint64_t>(n, remaining_));
        if (keep_) body_.append(p, take);
        p += take, n -= take, offset_ += take, remaining_ -= take;
        if (remaining_ == 0) on_body_done();
        break;
      }
      case State::Padding: {
        size_t take = size_t(std::min<uint64_t>(n, padding_));
        p += take, n -= take, offset_ += take, padding_ -= take;
        if (padding_ == 0) state_ = State::Header;
        break;
      }
    }
  }
}

void TarStream::on_header() {
  const std::string where = "tar stream of '" + source_ + "' at byte " + std::to_string(offset_ - 512);
  const char* h = header_.data();
  if (std::all_of(header_.begin(), header_.end(), [](char c) { return c == '\0'; })) {
    state_ = State::End;
    header_.clear();
    return;
  }
  // Checksum: sum of header bytes with the checksum field read as spaces.
  uint64_t sum = 0;
  for (int i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? 32u : static_cast<unsigned char>(h[i]);
  uint64_t stored = parse_octal(h + 148, 8, where);
  QKV_CHECK(sum == stored, where, "header checksum mismatch: stored ", stored, ", computed ", sum);
  type_ = h[156];
  uint64_t size = parse_octal(h + 124, 12, where);
  std::string name = field(h, 100);
  if (field(h + 257, 6) == "ustar") {
    std::string prefix = field(h + 345, 155);
    if (!prefix.empty()) name = prefix + "/" + name;
  }
  if (!long_name_.empty()) {
    name = long_name_;
    long_name_.clear();
  }
  path_ = name;
  while (path_.rfind("./", 0) == 0) path_.erase(0, 2);
  const bool regular = type_ == '0' || type_ == '\0' || type_ == '7';
  keep_ = type_ == 'L' || type_ == 'x' || (regular && want_(path_));
  body_.clear();
  header_.clear();
  remaining_ = size;
  padding_ = (512 - size % 512) % 512;
  if (size == 0)
    on_body_done();
  else
    state_ = State::Body;
}

void TarStream::on_body_done() {
  if (type_ == 'L') {
    long_name_ = field(body_.data(), body_.size());
  } else if (type_ == 'x') {  // pax records "LEN key=value\n"
    size_t pos = 0;
    while (pos < body_.size()) {
      size_t sp = body_.find(' ', pos);
      if (sp == std::string::npos) break;
      size_t len = 0;
      for (size_t k = pos; k < sp; ++k) {
        QKV_CHECK(body_[k] >= '0' && body_[k] <= '9' && len < (size_t(1) << 40),
                  "tar stream of '" + source_ + "'", "bad pax record length at byte ", offset_);
        len = len * 10 + size_t(body_[k] - '0');
      }
      if (len <= sp - pos + 1 || pos + len > body_.size()) break;
      std::string rec = body_.substr(sp + 1, pos + len - sp - 2);
      if (rec.rfind("path=", 0) == 0) long_name_ = rec.substr(5);
      pos += len;
    }
  } else if (keep_) {
    on_file_(path_, std::move(body_));
  }
  body_.clear();
  keep_ = false;
  state_ = padding_ ? State::Padding : State::Header;
}

void TarStream::finish() const {
  QKV_CHECK(state_ == State::Header || state_ == State::End, "tar stream of '" + source_ + "'",
            "truncated: stream ended inside an entry at byte ", offset_);
  QKV_CHECK(header_.empty(), "tar stream of '" + source_ + "'",
            "truncated: stream ended inside a header at byte ", offset_);
}

}  // namespace qkv::data::detail
