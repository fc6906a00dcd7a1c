// Fuzz target: a BERT vocab.txt (WordPiece); an accepted vocabulary then encodes and decodes text.
#include "fuzz_target.h"
#include "qkv/text/tokenizer.h"

QKV_FUZZ_TARGET(vocab_txt) {
  const std::string path = qkv::fuzz::scratch_file("vocab.txt", data, size);
  qkv::fuzz::expect_clean(path, [&] {
    auto tok = qkv::text::load_tokenizer(path);
    std::vector<int32_t> ids;
    tok->encode_model("Hello, unaffable world! caf\xc3\xa9 [UNK] 123", ids);
    (void)tok->decode_model(ids);
  });
  return 0;
}
