// qkv/text/tokenizer_json.h - Hugging Face tokenizer.json for the qkv tokenizers.
//   model "BPE" + ByteLevel pre_tokenizer/decoder      <-> BpeTokenizer (byte-level, GPT-2)
//   model "BPE" + WhitespaceSplit + BPEDecoder suffix  <-> BpeTokenizer (word-level, </w>)
//   model "WordPiece" + BertNormalizer + BertPreTokenizer <-> WordPieceTokenizer
//   model "WordLevel" + WhitespaceSplit / Split "."    <-> VocabTokenizer (word / char)
// added_tokens become special tokens (roles guessed from their names: [CLS] -> cls, <s> -> bos,
// ...); post_processor TemplateProcessing / BertProcessing / RobertaProcessing -> the template.
// Errors name the file and the JSON field, with what was expected and what was found.
#pragma once
#include <memory>
#include <string>

#include "qkv/text/tokenizer.h"

namespace qkv::text {

std::string to_tokenizer_json(const Tokenizer& tok);  // pretty-printed JSON text
// `where` names the source in errors (a file path).
std::unique_ptr<Tokenizer> from_tokenizer_json(const std::string& json_text, const std::string& where);
std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path);

}  // namespace qkv::text
