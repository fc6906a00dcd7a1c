// Fuzz target: config.json of a GPT directory (GPT2Config's keys), checked as loading does.
#include "fuzz_target.h"
#include "qkv/io/gpt2.h"

QKV_FUZZ_TARGET(config_gpt) {
  const std::string path = qkv::fuzz::scratch_file("gpt/config.json", data, size);
  qkv::fuzz::expect_clean(path, [&] { qkv::io::read_gpt2_config(path); });
  return 0;
}
