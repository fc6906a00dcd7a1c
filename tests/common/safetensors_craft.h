// tests/common/safetensors_craft.h - safetensors bytes from a hand-written header, for tests of
// malformed files.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace qkv::testing {

// The format: the header's length as u64 little-endian, the JSON header, then the raw buffer.
inline std::string craft_safetensors(const nlohmann::json& header, const std::string& buffer) {
  const std::string h = header.dump();
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(char((uint64_t(h.size()) >> (8 * i)) & 0xff));
  return out + h + buffer;
}

}  // namespace qkv::testing
