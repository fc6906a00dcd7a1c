// qkv/util/error.h - the one exception type qkv throws, and checks that build its message.
// Errors are values a user can act on: they name the op/file/field, what was expected and what
// was found (DESIGN.md). QKV_CHECK(cond, "op", "expected ..., got ", x) throws qkv::Error.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace qkv {

namespace detail {
// The message with control bytes other than newline and tab written as \u00XX: a key or a line
// quoted from bad input must not cut the message at a NUL (what() is a C string) or drive the
// terminal it is printed on.
inline std::string printable(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += char(c);
    }
  }
  return out;
}
}  // namespace detail

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(detail::printable(what)) {}
};

namespace detail {
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

// Builds "where: message" and throws qkv::Error.
template <typename... Args>
[[noreturn]] void fail(const std::string& where, const Args&... args) {
  throw Error(where + ": " + detail::cat(args...));
}

}  // namespace qkv

#define QKV_CHECK(cond, where, ...)          \
  do {                                       \
    if (!(cond)) ::qkv::fail(where, __VA_ARGS__); \
  } while (0)
