// qkv/util/hash.h - small deterministic hashes for reproducible choices (shuffles, splits).
#pragma once
#include <cstdint>
#include <string_view>

namespace qkv {

// SplitMix64 (Steele, Lea & Flood 2014): advances `state` and returns the next 64-bit value.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// 64-bit FNV-1a of the bytes of s.
inline uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace qkv
