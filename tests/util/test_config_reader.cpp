// ConfigReader::integer at the edges of int64_t: every JSON number that is an integer within
// [-2^63, 2^63-1] is read exactly; anything else is an error naming the file and the field.
// The config_bert fuzzer found 1e30-sized integers converted with undefined behaviour
// (tests/fuzz/crashes/config_bert/); an unsigned above 2^63-1 wrapped to a negative count.
#include "qkv/util/config.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "qkv/util/error.h"

namespace qkv {
namespace {

int64_t read_integer(const std::string& text) {
  ConfigReader r(nlohmann::json::parse("{\"n\": " + text + "}"), "cfg.json");
  return r.integer("n");
}

void expect_refused(const std::string& text) {
  try {
    int64_t v = read_integer(text);
    ADD_FAILURE() << text << " was read as " << v;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cfg.json: field 'n'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected an integer"), std::string::npos) << e.what();
  }
}

TEST(ConfigReader, IntegersWithinInt64AreReadExactly) {
  EXPECT_EQ(read_integer("5"), 5);
  EXPECT_EQ(read_integer("-7"), -7);
  EXPECT_EQ(read_integer("5.0"), 5);
  EXPECT_EQ(read_integer("9223372036854775807"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(read_integer("-9223372036854775808"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(read_integer("-9.223372036854775808e18"), std::numeric_limits<int64_t>::min());  // -2^63 exactly
  EXPECT_EQ(read_integer("4.5e15"), int64_t(4500000000000000));
}

TEST(ConfigReader, IntegersBeyondInt64AndFractionsAreRefusedNamingTheField) {
  expect_refused("9223372036854775808");   // 2^63: an unsigned, above int64_t
  expect_refused("18446744073709551615");  // 2^64-1: wrapped to -1 before
  expect_refused("9.223372036854775808e18");
  expect_refused("22222222222222222222222222");  // the fuzzer's: parsed as a double, far outside
  expect_refused("-1e300");
  expect_refused("2.5");
  expect_refused("\"5\"");
}

// integer_in: the range an int field holds. 2^32 + 1 once became keep_last 1 through int(...),
// deleting the older checkpoints, and 2^32 + 280 a vocabulary of 280.
TEST(ConfigReader, IntegerInRefusesWhatItsRangeCannotHold) {
  auto in = [](const std::string& text, int64_t lo, int64_t hi) {
    ConfigReader r(nlohmann::json::parse("{\"n\": " + text + "}"), "cfg.json", "train");
    return r.integer_in("n", 99, lo, hi);
  };
  EXPECT_EQ(in("7", 1, 10), 7);
  EXPECT_EQ(in("1e1", 1, 10), 10);
  EXPECT_EQ(in("-3", -5, 0), -3);
  ConfigReader absent(nlohmann::json::object(), "cfg.json");
  EXPECT_EQ(absent.integer_in("n", 99, 1, 10), 99);
  for (const char* bad : {"4294967297", "0", "11", "-1", "2.5", "true", "18446744073709551615"}) {
    try {
      in(bad, 1, 10);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cfg.json: field 'train.n': expected an integer in [1, 10], got " +
                                           std::string(bad)),
                std::string::npos)
          << e.what();
    }
  }
}

// A key with a NUL (or any control byte) in it: the message keeps everything after it, escaped,
// since what() is a C string and the message goes to a terminal.
TEST(ConfigReader, ControlBytesInAKeyAreEscapedNotCut) {
  nlohmann::json j = nlohmann::json::object();
  j[std::string("n_embd\0x\x1b[31m", 13)] = 1;
  ConfigReader r(j, "config.json");
  try {
    r.finish();
    FAIL() << "an unknown key was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("field 'n_embd\\u0000x\\u001b[31m': unknown key"), std::string::npos)
        << e.what();
  }
}

}  // namespace

TEST(ConfigReader, AnOptionalPathIsAbsentOrNonEmpty) {
  ConfigReader r(nlohmann::json::parse(R"({"a": "models/x", "b": "", "c": 5})"), "cfg.json");
  EXPECT_EQ(r.optional_path("a"), "models/x");
  EXPECT_EQ(r.optional_path("none"), "");
  for (const char* key : {"b", "c"}) {
    try {
      r.optional_path(key);
      ADD_FAILURE() << key << " was accepted";
    } catch (const Error& e) {
      const std::string want = std::string("cfg.json: field '") + key + "'";
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
}

}  // namespace qkv
