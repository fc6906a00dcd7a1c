// utf8::replace_invalid against CPython's bytes.decode("utf-8", "replace") (the expected strings
// below were produced by /usr/bin/python3 on these bytes): one U+FFFD per maximal subpart of an
// ill-formed sequence, valid text unchanged.
#include <gtest/gtest.h>

#include "qkv/util/utf8.h"

using namespace qkv;

TEST(Utf8ReplaceInvalid, MaximalSubpartsBecomeOneReplacementEachAsInPython) {
  const std::string R = "\xef\xbf\xbd";  // U+FFFD
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a\x80" "b", "a" + R + "b"},                           // a stray continuation byte
      {"\xe2\x82" "A", R + "A"},                              // a 3-byte lead and one continuation, cut short
      {"\xe2\x82", R},                                        // ... at the end of the text
      {"\xf0\x9f\x98", R},                                    // a 4-byte sequence missing its last byte
      {"\xed\xa0\x80", R + R + R},                            // a surrogate: ED's second byte out of range
      {"\xc0\xaf", R + R},                                    // an overlong lead
      {"\xf4\x90\x80\x80", R + R + R + R},                    // above U+10FFFF
      {"\xf0\x90\x80x", R + "x"},
      {"\xe0\x80\x80", R + R + R},                            // overlong 3-byte form
      {"\xff\xfe", R + R},
      {"\xf1\x80\x80\xe1\x80\xc2", R + R + R},
      {"h\xc3\xa9llo \xe2\x82\xac\xf0\x9d\x84\x9e", "h\xc3\xa9llo \xe2\x82\xac\xf0\x9d\x84\x9e"},  // valid: unchanged
      {std::string("a\0b", 3), std::string("a\0b", 3)},      // NUL is valid UTF-8
  };
  for (const auto& [in, want] : cases) {
    EXPECT_EQ(utf8::replace_invalid(in), want) << "input of " << in.size() << " bytes";
    EXPECT_TRUE(utf8::is_valid(utf8::replace_invalid(in)));
  }
}
