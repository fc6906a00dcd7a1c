// A tiny synthetic English-like corpus for language-model tests: documents of 2..5 sentences
// "<subject> <verb> <object>." drawn by an LCG from `seed`, each document two paragraphs (one
// per line) and a blank line after it. Writes train.txt (n_train documents) and valid.txt
// (n_valid documents) into dir.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

#include "qkv/util/file.h"

namespace qkv::testing {

inline void write_lm_corpus(const std::filesystem::path& dir, int n_train, int n_valid, uint64_t seed) {
  const char* subj[] = {"the cat", "a dog", "my friend", "the old man", "a small bird"};
  const char* verb[] = {"sees", "likes", "eats", "finds", "follows"};
  const char* obj[] = {"the ball", "a fish", "the red house", "some bread", "the river"};
  uint64_t s = seed;
  auto draw = [&](int n) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return int((s >> 33) % uint64_t(n));
  };
  auto document = [&] {
    std::string d;
    for (int para = 0; para < 2; ++para) {
      const int n = 1 + draw(3);
      for (int i = 0; i < n; ++i)
        d += std::string(i ? " " : "") + subj[draw(5)] + " " + verb[draw(5)] + " " + obj[draw(5)] + ".";
      d += "\n";
    }
    return d + "\n";
  };
  std::string train, valid;
  for (int i = 0; i < n_train; ++i) train += document();
  for (int i = 0; i < n_valid; ++i) valid += document();
  write_file_atomic((dir / "train.txt").string(), train);
  write_file_atomic((dir / "valid.txt").string(), valid);
}

}  // namespace qkv::testing
