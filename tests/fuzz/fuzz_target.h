// tests/fuzz/fuzz_target.h - one fuzz target per input format qkv reads (issue 19).
//
// A target is a function of the input bytes written once, in tests/fuzz/<name>.cpp:
//   QKV_FUZZ_TARGET(safetensors) { qkv::fuzz::expect_clean(..., [&] { parse(...); }); return 0; }
// It is compiled two ways:
//   - with QKV_FUZZ_ENTRY (scripts/fuzz.sh, clang, libFuzzer + ASan + UBSan): the file alone is a
//     fuzzer binary, the macro defining LLVMFuzzerTestOneInput;
//   - without (the test suite, gcc, Release and ASan): every target registers itself and
//     test_replay.cpp runs each one over its seed corpus (tests/fuzz/corpus/<name>/) and every
//     crash input ever found (tests/fuzz/crashes/<name>/).
// The contract a target checks: an input is either accepted or rejected with a qkv::Error whose
// message names the input's file (or source name); any other exception, a message that does not
// say where, or a sanitizer report is a bug (printed, then abort(): libFuzzer keeps the input).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <string>

#include "qkv/util/error.h"

namespace qkv::fuzz {

using TargetFn = int (*)(const uint8_t* data, size_t size);
std::map<std::string, TargetFn>& targets();
struct RegisterTarget {
  RegisterTarget(const char* name, TargetFn fn) { targets()[name] = fn; }
};

// Writes the bytes to a file of this process (under $TMPDIR) named `name`; returns its path.
std::string scratch_file(const std::string& name, const void* data, size_t size);
inline std::string scratch_file(const std::string& name, const std::string& bytes) {
  return scratch_file(name, bytes.data(), bytes.size());
}
// The directory scratch_file writes into.
std::string scratch_dir();

[[noreturn]] inline void bug(const std::string& what) {
  std::fprintf(stderr, "qkv fuzz: BUG: %s\n", what.c_str());
  std::abort();
}

// Runs f(); a qkv::Error naming `source` is a proper rejection, anything else thrown is a bug.
template <typename F>
void expect_clean(const std::string& source, F&& f) {
  try {
    f();
  } catch (const qkv::Error& e) {
    const std::string m = e.what();
    if (m.find(source) == std::string::npos) bug("the error does not name '" + source + "': " + m);
  } catch (const std::exception& e) {
    bug(std::string("a non-qkv exception escaped: ") + e.what());
  }
}

}  // namespace qkv::fuzz

#ifdef QKV_FUZZ_ENTRY
#define QKV_FUZZ_TARGET(name)                                                              \
  static int fuzz_##name(const uint8_t* data, size_t size);                                \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {                \
    return fuzz_##name(data, size);                                                        \
  }                                                                                        \
  static int fuzz_##name(const uint8_t* data, size_t size)
#else
#define QKV_FUZZ_TARGET(name)                                                              \
  static int fuzz_##name(const uint8_t* data, size_t size);                                \
  static const ::qkv::fuzz::RegisterTarget register_##name(#name, fuzz_##name);            \
  static int fuzz_##name(const uint8_t* data, size_t size)
#endif
