// qkv/util/config.h - strict reading of JSON configs.
// Every key a reader does not consume is an error naming the file and the key, so a typo in a
// config ("warmpu") fails loudly instead of silently using a default.
//
//   ConfigReader r(json, "run.json", "optimizer");
//   double lr = r.number("lr", 1e-3);        // optional with default
//   int64_t w = r.integer("warmup");          // required
//   r.finish();                               // throws on unknown keys
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

namespace qkv {

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& j, std::string file, std::string section = "");
  double number(const std::string& key);
  double number(const std::string& key, double dflt);
  int64_t integer(const std::string& key);
  int64_t integer(const std::string& key, int64_t dflt);
  // An integer in [lo, hi] (default when absent): for values a narrower type holds, so that 2^32 + 1
  // is an error, not a quiet 1.
  int64_t integer_in(const std::string& key, int64_t dflt, int64_t lo, int64_t hi);
  bool boolean(const std::string& key, bool dflt);
  std::string string(const std::string& key);
  std::string string(const std::string& key, const std::string& dflt);
  // An optional file or directory: "" when the key is absent; when present, a non-empty string.
  std::string optional_path(const std::string& key);
  bool has(const std::string& key) const { return j_.contains(key); }
  // A nested object (required, or an empty object when absent and optional).
  nlohmann::json object(const std::string& key, bool required = true);
  nlohmann::json raw(const std::string& key);  // any JSON value, marked consumed
  // A key that may only be absent or equal `want` (a foreign format's setting whose every other
  // value changes what `what` computes): anything else throws naming the key and both values.
  void fixed(const std::string& key, const nlohmann::json& want, const char* what);
  void finish() const;  // throws naming the first key nobody read
  std::string where(const std::string& key) const;  // "file: section.key"

 private:
  const nlohmann::json& get(const std::string& key, const char* expected);
  nlohmann::json j_;
  std::string file_, section_;
  std::set<std::string> used_;
};

}  // namespace qkv
