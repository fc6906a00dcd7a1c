// src/eval/corpus_refs.h - shared by the corpus scorers: checks the reference layout, picks
// the non-empty references of one segment (sacreBLEU drops empty ones per segment), and formats
// scores and signatures as sacreBLEU prints them.
#pragma once
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "qkv/util/error.h"

namespace qkv::eval::detail {

inline void check_layout(const char* op, size_t nhyps,
                         const std::vector<std::vector<std::string>>& refs) {
  QKV_CHECK(!refs.empty(), op, "expected at least one reference stream, got none");
  for (size_t k = 0; k < refs.size(); ++k)
    QKV_CHECK(refs[k].size() == nhyps, op, "reference stream ", k, " has ", refs[k].size(),
              " lines, expected ", nhyps, " (one per hypothesis)");
}

inline std::vector<const std::string*> segment_refs(
    const char* op, const std::vector<std::vector<std::string>>& refs, size_t i) {
  std::vector<const std::string*> out;
  for (const auto& stream : refs)
    if (!stream[i].empty()) out.push_back(&stream[i]);
  QKV_CHECK(!out.empty(), op, "segment ", i + 1, ": every reference line is empty");
  return out;
}

inline std::string nrefs_field(const std::set<size_t>& counts) {
  return counts.size() == 1 ? std::to_string(*counts.begin()) : "var";
}

// v with `width` decimals ("%.*f").
inline std::string fixed(double v, int width) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", width, v);
  return buf;
}

// The signature's "key:value|key:value" fields as JSON members, as sacreBLEU's JSON adds them.
inline void add_signature_fields(nlohmann::ordered_json& j, const std::string& signature) {
  for (size_t a = 0; a < signature.size();) {
    size_t bar = signature.find('|', a);
    if (bar == std::string::npos) bar = signature.size();
    std::string kv = signature.substr(a, bar - a);
    size_t colon = kv.find(':');
    j[kv.substr(0, colon)] = kv.substr(colon + 1);
    a = bar + 1;
  }
}

}  // namespace qkv::eval::detail
