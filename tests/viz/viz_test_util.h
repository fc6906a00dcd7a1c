// tests/viz/viz_test_util.h - helpers for the image tests: temp paths, running a Python snippet
// (Debian's python3-pil and xml.etree as independent readers), an independent colour-map table.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <string>

#include "qkv/viz/image.h"

namespace qkv::testing {

inline std::string tmp_path(const std::string& name) {
  return "/tmp/qkv_viz_test_" + std::to_string(::getpid()) + "_" + name;
}

// Runs <code> with /usr/bin/python3 -I (isolated: /tmp modules cannot shadow the stdlib) on <arg> and returns its stdout (fails the test on error).
inline std::string python(const std::string& code, const std::string& arg) {
  const std::string script = tmp_path("snippet.py");
  FILE* f = std::fopen(script.c_str(), "w");
  std::fputs(code.c_str(), f);
  std::fclose(f);
  const std::string cmd = "/usr/bin/python3 -I '" + script + "' '" + arg + "'";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int rc = pclose(p);
  std::remove(script.c_str());
  EXPECT_EQ(rc, 0) << "python failed: " << cmd << "\n" << out;
  return out;
}

// matplotlib's viridis at its 9 published stops, interpolated here independently of qkv.
inline viz::Rgb viridis_ref(double t) {
  static const unsigned hex[9] = {0x440154, 0x482878, 0x3e4989, 0x31688e, 0x26828e,
                                  0x1f9e89, 0x35b779, 0x6ece58, 0xfde725};
  t = std::fmin(std::fmax(t, 0.0), 1.0) * 8;
  int i = std::min(int(t), 7);
  double f = t - i;
  auto ch = [&](int shift) {
    double a = (hex[i] >> shift) & 0xFF, b = (hex[i + 1] >> shift) & 0xFF;
    return uint8_t(std::lround(a + (b - a) * f));
  };
  return {ch(16), ch(8), ch(0)};
}

}  // namespace qkv::testing
