// tests/text/gpt2_tokenizer.h - GPT-2's real tokenizer files from the npm cache.
#pragma once
#include <memory>
#include <string>

#include "qkv/text/bpe.h"
#include "text_fixtures.h"

namespace qkv::testing {

// GPT-2's encoder.json + vocab.bpe; `quirk`: load_gpt2's js_comma_key_quirk (text/bpe.h).
inline std::unique_ptr<text::BpeTokenizer> gpt2(bool quirk) {
  const std::string d = npm_cache() + "/gpt2/";
  return text::BpeTokenizer::load_gpt2(d + "encoder.json", d + "vocab.bpe", quirk);
}

}  // namespace qkv::testing
