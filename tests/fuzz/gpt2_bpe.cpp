// Fuzz target: GPT-2's encoder.json + vocab.bpe, given as one input: the encoder, a line
// "#qkv-fuzz-split#", the merges. An accepted pair then encodes and decodes text.
#include <string_view>

#include "fuzz_target.h"
#include "qkv/text/tokenizer.h"

QKV_FUZZ_TARGET(gpt2_bpe) {
  const std::string_view all(reinterpret_cast<const char*>(data), size), split = "\n#qkv-fuzz-split#\n";
  const size_t at = all.find(split);
  const std::string_view enc = all.substr(0, at), bpe = at == all.npos ? "" : all.substr(at + split.size());
  qkv::fuzz::scratch_file("gpt2/encoder.json", enc.data(), enc.size());
  qkv::fuzz::scratch_file("gpt2/vocab.bpe", bpe.data(), bpe.size());
  const std::string dir = qkv::fuzz::scratch_dir() + "/gpt2";
  qkv::fuzz::expect_clean(dir, [&] {
    auto tok = qkv::text::load_tokenizer(dir);
    std::vector<int32_t> ids;
    tok->encode_model("Hello, world! caf\xc3\xa9 <|endoftext|> 123", ids);
    (void)tok->decode_model(ids);
  });
  return 0;
}
