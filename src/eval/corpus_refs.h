// src/eval/corpus_refs.h - shared by the corpus scorers: checks the reference layout and picks
// the non-empty references of one segment (sacreBLEU drops empty ones per segment).
#pragma once
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

}  // namespace qkv::eval::detail
