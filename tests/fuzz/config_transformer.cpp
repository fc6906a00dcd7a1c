// Fuzz target: config.json of a translation model directory (model_type transformer; the same
// reader takes rnn, which has its own target), checked as loading does, without building it.
#include "fuzz_target.h"
#include "qkv/io/model_dir.h"

QKV_FUZZ_TARGET(config_transformer) {
  const std::string path = qkv::fuzz::scratch_file("transformer/config.json", data, size);
  qkv::fuzz::expect_clean(path, [&] { qkv::io::read_seq2seq_config(path); });
  return 0;
}
