// TrainOptions::from_config: every key in range for the type that holds it, and nothing that
// run.json cannot write back. keep_last 2^32 + 1 once became 1 through int(...), deleting the
// older checkpoints; max_minutes inf was stored as null and the run could not be resumed.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "qkv/train/trainer.h"
#include "qkv/util/config.h"
#include "qkv/util/error.h"

using namespace qkv;

namespace {

std::string options_error(const nlohmann::json& train) {
  ConfigReader r(train, "run.json", "train");
  try {
    train::TrainOptions::from_config(r);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(TrainOptions, OutOfRangeKeysAreRefusedByName) {
  const nlohmann::json base = {{"max_steps", 10}};
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* want;
  };
  const Case cases[] = {
      {"keep_last", 4294967297ull, "field 'train.keep_last': expected an integer in [1, 2147483647], got 4294967297"},
      {"keep_last", 0, "field 'train.keep_last': expected an integer in [1, 2147483647], got 0"},
      {"patience", -1, "field 'train.patience': expected an integer in [0, 2147483647], got -1"},
      {"average_last", 2147483648ll, "field 'train.average_last': expected an integer in [0, 2147483647]"},
      {"max_nonfinite_skips", -2, "field 'train.max_nonfinite_skips': expected an integer in [0, 2147483647]"},
      {"max_minutes", std::numeric_limits<double>::infinity(), "field 'train.max_minutes': must be a finite number"},
      {"max_minutes", std::nan(""), "field 'train.max_minutes': must be a finite number"},
      {"max_steps", -5, "field 'train.max_steps': expected an integer in [0, 9223372036854775807], got -5"},
      {"max_epochs", -2, "field 'train.max_epochs': expected an integer in [0, 9223372036854775807], got -2"},
      {"valid_every", -1, "field 'train.valid_every': expected an integer in [0, 9223372036854775807], got -1"},
      {"save_every", -7, "field 'train.save_every': expected an integer in [0, 9223372036854775807], got -7"},
      {"log_every", 0, "field 'train.log_every': expected an integer in [1, 9223372036854775807], got 0"},
      {"accum_steps", 1000000000000ll, "field 'train.accum_steps': expected an integer in [1, 4096]"},
      {"accum_steps", 0, "field 'train.accum_steps': expected an integer in [1, 4096], got 0"},
      {"clip_norm", -1.0, "field 'train.clip_norm': must be a finite number >= 0 (0: no clipping), got -1"},
      {"clip_norm", std::numeric_limits<double>::infinity(), "field 'train.clip_norm': must be a finite number"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = base;
    j[c.key] = c.value;
    const std::string err = options_error(j);
    EXPECT_NE(err.find(c.want), std::string::npos) << c.key << " = " << c.value.dump() << ": " << err;
  }
  nlohmann::json ok = base;
  ok["keep_last"] = 3, ok["average_last"] = 2, ok["max_minutes"] = 1.5;
  EXPECT_EQ(options_error(ok), "");
}
