// Fuzz target: config.json of a BERT directory (BertConfig's keys), checked as loading does.
#include "fuzz_target.h"
#include "qkv/io/bert.h"

QKV_FUZZ_TARGET(config_bert) {
  const std::string path = qkv::fuzz::scratch_file("bert/config.json", data, size);
  qkv::fuzz::expect_clean(path, [&] { qkv::io::read_bert_config(path); });
  return 0;
}
