#include "qkv/util/config.h"

#include <cmath>
#include <limits>

#include "qkv/util/error.h"

namespace qkv {

ConfigReader::ConfigReader(const nlohmann::json& j, std::string file, std::string section)
    : j_(j), file_(std::move(file)), section_(std::move(section)) {
  QKV_CHECK(j_.is_object(), file_, (section_.empty() ? std::string("config") : section_),
            " must be a JSON object, got ", j_.dump());
}

std::string ConfigReader::where(const std::string& key) const {
  return file_ + ": field '" + (section_.empty() ? key : section_ + "." + key) + "'";
}

const nlohmann::json& ConfigReader::get(const std::string& key, const char* expected) {
  QKV_CHECK(j_.contains(key), where(key), "missing; expected ", expected);
  used_.insert(key);
  return j_[key];
}

double ConfigReader::number(const std::string& key) {
  const auto& v = get(key, "a number");
  QKV_CHECK(v.is_number(), where(key), "expected a number, got ", v.dump());
  return v.get<double>();
}
double ConfigReader::number(const std::string& key, double dflt) { return has(key) ? number(key) : dflt; }

// An integer written as 5 or 5.0, within int64_t. Converting a double outside that range (1e30)
// to int64_t is undefined behaviour (the config_bert fuzzer's crash-3910ed11...: UBSan's
// float-cast-overflow), and an unsigned above 2^63-1 used to wrap to a negative count.
namespace {

// A JSON number that is an integer int64_t holds (1e3 too), else nothing.
std::optional<int64_t> as_int64(const nlohmann::json& v) {
  constexpr double kTwo63 = 9223372036854775808.0;  // 2^63, exact in a double
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return int64_t(v.get<uint64_t>());
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d >= -kTwo63 && d < kTwo63 && d == std::trunc(d)) return int64_t(d);
  }
  return std::nullopt;
}

}  // namespace

int64_t ConfigReader::integer(const std::string& key) {
  const auto& v = get(key, "an integer");
  const std::optional<int64_t> x = as_int64(v);
  QKV_CHECK(x.has_value(), where(key), "expected an integer between -2^63 and 2^63-1, got ", v.dump());
  return *x;
}
int64_t ConfigReader::integer(const std::string& key, int64_t dflt) { return has(key) ? integer(key) : dflt; }

int64_t ConfigReader::integer_in(const std::string& key, int64_t dflt, int64_t lo, int64_t hi) {
  if (!has(key)) return dflt;
  const auto& v = get(key, "an integer");
  const std::optional<int64_t> x = as_int64(v);
  QKV_CHECK(x && *x >= lo && *x <= hi, where(key), "expected an integer in [", lo, ", ", hi, "], got ", v.dump());
  return *x;
}

bool ConfigReader::boolean(const std::string& key, bool dflt) {
  if (!has(key)) return dflt;
  const auto& v = get(key, "true or false");
  QKV_CHECK(v.is_boolean(), where(key), "expected true or false, got ", v.dump());
  return v.get<bool>();
}

std::string ConfigReader::string(const std::string& key) {
  const auto& v = get(key, "a string");
  QKV_CHECK(v.is_string(), where(key), "expected a string, got ", v.dump());
  return v.get<std::string>();
}
std::string ConfigReader::string(const std::string& key, const std::string& dflt) {
  return has(key) ? string(key) : dflt;
}

std::string ConfigReader::optional_path(const std::string& key) {
  if (!has(key)) return "";
  const std::string p = string(key);
  QKV_CHECK(!p.empty(), where(key), "expected a path, got an empty string (leave the key out for none)");
  return p;
}

nlohmann::json ConfigReader::object(const std::string& key, bool required) {
  if (!required && !has(key)) return nlohmann::json::object();
  const auto& v = get(key, "an object");
  QKV_CHECK(v.is_object(), where(key), "expected an object, got ", v.dump());
  return v;
}

nlohmann::json ConfigReader::raw(const std::string& key) { return get(key, "a value"); }

void ConfigReader::fixed(const std::string& key, const nlohmann::json& want, const char* what) {
  if (!has(key)) return;
  const nlohmann::json& v = get(key, "a value");
  QKV_CHECK(v == want, where(key), "qkv reads ", what, " only with ", want.dump(), ", got ", v.dump());
}

void ConfigReader::finish() const {
  for (auto& [k, v] : j_.items())
    QKV_CHECK(used_.count(k), where(k), "unknown key (check the spelling; see docs/config.md)");
}

}  // namespace qkv
