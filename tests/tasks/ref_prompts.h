// The prompts of a GPT generation reference (tools/refs/gpt_generate.py, gpt_beam.py): "prompts"
// holds them end to end, "prompt_lens" their lengths.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ref.h"

namespace qkv::testing {

inline std::vector<std::vector<int64_t>> prompts_of(const RefFile& ref, const std::string& c) {
  const std::vector<int64_t> flat = ref.get(c, "prompts").to_vector<int64_t>();
  std::vector<std::vector<int64_t>> out;
  size_t at = 0;
  for (int64_t n : ref.get(c, "prompt_lens").to_vector<int64_t>()) {
    out.emplace_back(flat.begin() + int64_t(at), flat.begin() + int64_t(at) + n);
    at += size_t(n);
  }
  return out;
}

}  // namespace qkv::testing
