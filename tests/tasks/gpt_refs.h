// The GPT generation references (tools/refs/gpt_generate.py, gpt_beam.py): their models, their
// prompts and the character tokenizer their vocabulary matches.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "qkv/io/gpt2.h"
#include "qkv/text/char_word.h"
#include "ref.h"

namespace qkv::testing {

// Case c's model, a GPT-2 directory under the reference folder.
inline io::GptBundle load_ref_gpt(const RefFile& ref, const std::string& c) {
  return io::load_gpt2((std::filesystem::path(ref_dir()) / ref.params(c)["dir"].get<std::string>()).string());
}

// 97 symbols, matching the reference models' vocabulary: <unk>, '\n' and printable ASCII.
inline std::shared_ptr<text::Tokenizer> ref_char_tokenizer() {
  std::vector<std::string> vocab = {"<unk>", "\n"};
  for (char c = 32; c < 127; ++c) vocab.push_back(std::string(1, c));
  return std::make_shared<text::VocabTokenizer>(text::VocabTokenizer::Level::Char, vocab, "<unk>");
}

// "prompts" holds case c's prompts end to end, "prompt_lens" their lengths.
inline std::vector<std::vector<int64_t>> prompts_of(const RefFile& ref, const std::string& c) {
  const std::vector<int64_t> flat = ref.get(c, "prompts").to_vector<int64_t>();
  std::vector<std::vector<int64_t>> out;
  size_t at = 0;
  for (int64_t n : ref.get(c, "prompt_lens").to_vector<int64_t>()) {
    out.emplace_back(flat.begin() + int64_t(at), flat.begin() + int64_t(at) + n);
    at += size_t(n);
  }
  return out;
}

}  // namespace qkv::testing
