// qkv/util/error.h - the one exception type qkv throws, and checks that build its message.
// Errors are values a user can act on: they name the op/file/field, what was expected and what
// was found (DESIGN.md). QKV_CHECK(cond, "op", "expected ..., got ", x) throws qkv::Error.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace qkv {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
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
