// Fuzz target: config.json of a translation model directory (model_type rnn; the same
// reader takes transformer, which has its own target), checked as loading does, without building it.
#include "fuzz_target.h"
#include "qkv/io/model_dir.h"

QKV_FUZZ_TARGET(config_rnn) {
  const std::string path = qkv::fuzz::scratch_file("rnn/config.json", data, size);
  qkv::fuzz::expect_clean(path, [&] { qkv::io::read_seq2seq_config(path); });
  return 0;
}
