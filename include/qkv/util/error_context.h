// qkv/util/error_context.h - naming the file in errors raised deep inside a loader.
#pragma once
#include <string>
#include <string_view>

#include "qkv/util/error.h"

namespace qkv {

// Runs f() and returns its result; a qkv::Error from inside whose message does not contain
// `where` is rethrown as "where: <message>", so that a check deep inside a loader (a tokenizer's
// constructor, an optimizer's state) still names the file it was reading.
template <typename F>
auto with_context(const std::string& where, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    if (std::string_view(e.what()).find(where) == std::string_view::npos) fail(where, e.what());
    throw;
  }
}

}  // namespace qkv
