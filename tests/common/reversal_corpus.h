// A tiny synthetic translation task for CLI tests: "w1 .. wn" -> "wn .. w1" (n = 2..5) over ten
// words, drawn by an LCG from `seed`. Writes train.tsv (the first n_train pairs), valid.tsv, and
// valid.src / valid.ref (the rest) into dir.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "qkv/util/file.h"

namespace qkv::testing {

inline void write_reversal_corpus(const std::filesystem::path& dir, int n_pairs, int n_train, uint64_t seed) {
  const char* words[] = {"alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa"};
  std::string train, valid, vsrc, vref;
  uint64_t s = seed;
  for (int i = 0; i < n_pairs; ++i) {
    std::vector<std::string> w;
    const int n = 2 + i % 4;
    for (int j = 0; j < n; ++j) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      w.push_back(words[(s >> 33) % 10]);
    }
    std::string a, b;
    for (int j = 0; j < n; ++j) a += (j ? " " : "") + w[size_t(j)];
    for (int j = n - 1; j >= 0; --j) b += w[size_t(j)] + (j ? " " : "");
    if (i < n_train) {
      train += a + "\t" + b + "\n";
    } else {
      valid += a + "\t" + b + "\n";
      vsrc += a + "\n";
      vref += b + "\n";
    }
  }
  write_file_atomic((dir / "train.tsv").string(), train);
  write_file_atomic((dir / "valid.tsv").string(), valid);
  write_file_atomic((dir / "valid.src").string(), vsrc);
  write_file_atomic((dir / "valid.ref").string(), vref);
}

}  // namespace qkv::testing
