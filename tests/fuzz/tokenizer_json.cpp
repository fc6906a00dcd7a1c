// Fuzz target: a Hugging Face tokenizer.json; an accepted tokenizer then encodes and decodes text.
#include "fuzz_target.h"
#include "qkv/text/tokenizer.h"

QKV_FUZZ_TARGET(tokenizer_json) {
  const std::string path = qkv::fuzz::scratch_file("tokenizer.json", data, size);
  qkv::fuzz::expect_clean(path, [&] {
    auto tok = qkv::text::load_tokenizer(path);
    std::vector<int32_t> ids;
    tok->encode_model("Hello, world! caf\xc3\xa9 <|endoftext|> [SEP] 123", ids);
    (void)tok->decode_model(ids);
  });
  return 0;
}
