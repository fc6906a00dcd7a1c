// src/serve/json_request.h - a request body read strictly: a JSON object whose fields are all
// known, each of the type and in the range the endpoint takes. Anything else throws HttpError
// with status 400 (or the status of the limit passed) and a message naming the field, what was
// expected and what was read.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace qkv::serve {

// An answer other than 200: status, OpenAI's error "type", the field concerned, and for a limit
// its name (the flag that sets it), sent as {"error": {"message", "type", "param", "code"}}.
struct HttpError : std::runtime_error {
  int status;
  std::string type, param, code;
  HttpError(int status, std::string message, std::string type = "invalid_request_error", std::string param = "",
            std::string code = "")
      : std::runtime_error(std::move(message)), status(status), type(std::move(type)), param(std::move(param)),
        code(std::move(code)) {}
};

// The error answer for a limit: status (400, 413 or 429), code = the limit's name.
HttpError limit_error(int status, const std::string& limit, const std::string& message, const std::string& param = "");

// A JSON value for an error message: a scalar as JSON, an array or object by its kind only. A
// request's value is never dumped whole: dump() recurses, and a value nested 100,000 deep (200 KB,
// within the body limit) overflowed a worker's stack and took the server down.
std::string shown_value(const nlohmann::json& v);

class JsonRequest {
 public:
  // Parses `body` (an endpoint's name for messages); `fields` are the names it takes.
  JsonRequest(const std::string& body, const std::string& endpoint, std::vector<std::string> fields);

  bool has(const std::string& name) const;  // present and not null
  std::optional<std::string> string(const std::string& name) const;
  bool boolean(const std::string& name, bool def) const;
  int64_t integer(const std::string& name, int64_t def, int64_t lo, int64_t hi) const;
  uint64_t unsigned_integer(const std::string& name, uint64_t def) const;
  // In [lo, hi], or (lo, hi] with lo_open; the error states the range as given.
  double number(const std::string& name, double def, double lo, double hi, bool lo_open = false) const;
  // A string, or an array of them (at least one): e.g. OpenAI's "prompt" and "input".
  std::vector<std::string> string_or_strings(const std::string& name) const;
  std::vector<std::string> strings(const std::string& name) const;  // an array of strings (may be empty)
  std::vector<int64_t> integers(const std::string& name) const;     // an array of integers
  const nlohmann::json& json() const { return j_; }

 private:
  [[noreturn]] void bad(const std::string& name, const std::string& expected) const;
  std::string endpoint_;
  nlohmann::json j_;
};

}  // namespace qkv::serve
