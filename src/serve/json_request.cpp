#include "json_request.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "qkv/util/utf8.h"

namespace qkv::serve {

HttpError limit_error(int status, const std::string& limit, const std::string& message, const std::string& param) {
  return HttpError(status, message + " (limit " + limit + ")", "limit_exceeded", param, limit);
}

namespace {

// What a JSON value is, for "expected X, got Y" messages.
std::string kind_of(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::boolean: return "a boolean";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::number_float: return "the number " + v.dump();
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "the integer " + v.dump();
    default: return "a " + std::string(v.type_name());
  }
}

}  // namespace

std::string shown_value(const nlohmann::json& v) { return v.is_structured() ? kind_of(v) : v.dump(); }

JsonRequest::JsonRequest(const std::string& body, const std::string& endpoint, std::vector<std::string> fields)
    : endpoint_(endpoint) {
  if (body.find_first_not_of(" \t\r\n") == std::string::npos)
    throw HttpError(400, endpoint + ": the request body is empty; expected a JSON object");
  // nlohmann's parser rejects ill-formed UTF-8 in strings and numbers beyond double; it is checked
  // here too so that the message says what was wrong whatever the parser's wording.
  if (!utf8::is_valid(body)) throw HttpError(400, endpoint + ": the request body is not valid UTF-8");
  try {
    j_ = nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    throw HttpError(400, endpoint + ": the request body is not valid JSON: " + std::string(e.what()));
  }
  if (!j_.is_object()) throw HttpError(400, endpoint + ": expected a JSON object, got " + kind_of(j_));
  for (auto& [k, v] : j_.items()) {
    (void)v;
    if (std::find(fields.begin(), fields.end(), k) == fields.end()) {
      std::string known;
      for (auto& f : fields) known += (known.empty() ? "" : ", ") + f;
      throw HttpError(400, endpoint + ": unknown field \"" + k + "\" (this endpoint takes " + known + ")", "invalid_request_error", k);
    }
  }
}

void JsonRequest::bad(const std::string& name, const std::string& expected) const {
  throw HttpError(400, endpoint_ + ": field \"" + name + "\": expected " + expected + ", got " + kind_of(j_.at(name)),
                  "invalid_request_error", name);
}

bool JsonRequest::has(const std::string& name) const { return j_.contains(name) && !j_.at(name).is_null(); }

std::optional<std::string> JsonRequest::string(const std::string& name) const {
  if (!has(name)) return std::nullopt;
  if (!j_.at(name).is_string()) bad(name, "a string");
  return j_.at(name).get<std::string>();
}

bool JsonRequest::boolean(const std::string& name, bool def) const {
  if (!has(name)) return def;
  if (!j_.at(name).is_boolean()) bad(name, "true or false");
  return j_.at(name).get<bool>();
}

int64_t JsonRequest::integer(const std::string& name, int64_t def, int64_t lo, int64_t hi) const {
  if (!has(name)) return def;
  const auto& v = j_.at(name);
  const std::string range = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  // nlohmann stores a non-negative literal as unsigned: range-check it as such first (0 included).
  if (v.is_number_unsigned() && (hi < 0 || v.get<uint64_t>() > uint64_t(hi))) bad(name, range);
  if (!v.is_number_integer()) bad(name, range);
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) bad(name, range);
  return x;
}

uint64_t JsonRequest::unsigned_integer(const std::string& name, uint64_t def) const {
  if (!has(name)) return def;
  const auto& v = j_.at(name);
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return uint64_t(v.get<int64_t>());
  bad(name, "an integer in [0, 18446744073709551615]");
}

double JsonRequest::number(const std::string& name, double def, double lo, double hi, bool lo_open) const {
  if (!has(name)) return def;
  const auto& v = j_.at(name);
  auto fmt = [](double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", x);
    return std::string(b);
  };
  const std::string range = std::string("a number in ") + (lo_open ? "(" : "[") + fmt(lo) + ", " + fmt(hi) + "]";
  if (!v.is_number()) bad(name, range);
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || (lo_open && x == lo) || x > hi) bad(name, range);
  return x;
}

std::vector<std::string> JsonRequest::strings(const std::string& name) const {
  if (!has(name)) return {};
  const auto& v = j_.at(name);
  if (!v.is_array()) bad(name, "an array of strings");
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string())
      throw HttpError(400, endpoint_ + ": field \"" + name + "\" element " + std::to_string(i) +
                               ": expected a string, got " + kind_of(v[i]), "invalid_request_error", name);
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

std::vector<std::string> JsonRequest::string_or_strings(const std::string& name) const {
  if (!has(name)) throw HttpError(400, endpoint_ + ": field \"" + name + "\" is required", "invalid_request_error", name);
  const auto& v = j_.at(name);
  if (v.is_string()) return {v.get<std::string>()};
  if (!v.is_array()) bad(name, "a string or an array of strings");
  auto out = strings(name);
  if (out.empty()) bad(name, "a string or a non-empty array of strings");
  return out;
}

std::vector<int64_t> JsonRequest::integers(const std::string& name) const {
  if (!has(name)) throw HttpError(400, endpoint_ + ": field \"" + name + "\" is required", "invalid_request_error", name);
  const auto& v = j_.at(name);
  if (!v.is_array()) bad(name, "an array of integers");
  std::vector<int64_t> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number_integer() || (v[i].is_number_unsigned() && v[i].get<uint64_t>() > uint64_t(INT64_MAX)))
      throw HttpError(400, endpoint_ + ": field \"" + name + "\" element " + std::to_string(i) +
                               ": expected an integer, got " + kind_of(v[i]), "invalid_request_error", name);
    out.push_back(v[i].get<int64_t>());
  }
  return out;
}

}  // namespace qkv::serve
