// tests/eval/vectors.h - loads the BLEU/chrF vectors written by tools/eval/make_vectors.py (the
// independent Python reference tools/eval/sacrebleu_ref.py), generating them on first use.
#pragma once
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace qkv::testing {

inline const nlohmann::json& eval_vectors() {
  static const nlohmann::json j = [] {
    const std::string dir = std::string(QKV_BINARY_DIR) + "/refs";
    const std::string out = dir + "/eval_vectors." + std::to_string(::getpid()) + ".json";
    const std::string cmd = "mkdir -p '" + dir + "' && /usr/bin/python3 '" QKV_SOURCE_DIR
                            "/tools/eval/make_vectors.py' '" + out + "'";
    if (std::system(cmd.c_str()) != 0) {
      ADD_FAILURE() << "reference generator failed: " << cmd;
      return nlohmann::json::object();
    }
    std::ifstream f(out);
    nlohmann::json v = nlohmann::json::parse(f);
    std::remove(out.c_str());
    return v;
  }();
  return j;
}

}  // namespace qkv::testing
