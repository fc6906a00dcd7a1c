// qkv/text/special_tokens.h - special-token roles per model and add-special-tokens templates
// (Hugging Face TemplateProcessing semantics: pieces are $A/$B or a special token, each with a
// segment/type id).
#pragma once
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace qkv::text {

enum class Role { Pad, Unk, Cls, Sep, Mask, Bos, Eos, Start, Delim, Extract };
const char* role_name(Role r);  // "pad", "unk", ...
Role role_from_name(std::string_view name);  // throws qkv::Error on an unknown name

// Which token string plays which role; a model sets the roles it uses.
struct SpecialTokens {
  std::map<Role, std::string> tokens;
  static SpecialTokens bert();          // [PAD] [UNK] [CLS] [SEP] [MASK]
  static SpecialTokens gpt2();          // <|endoftext|> as bos/eos/unk
  static SpecialTokens seq2seq();       // <pad> <unk> <s> </s>
  static SpecialTokens gpt_finetune();  // [PAD] [UNK] [START] [DELIM] [EXTRACT] (Radford et al. 2018)
  std::vector<std::string> distinct() const;  // each token once, in role order
};

struct TemplatePiece {
  bool is_sequence = false;  // $A / $B
  int sequence = 0;          // 0 = A, 1 = B (when is_sequence)
  std::string token;         // the special token (when !is_sequence)
  int type_id = 0;
};

// Post-processing templates for one sequence and for a pair.
struct PostTemplate {
  std::vector<TemplatePiece> single, pair;
  // HF template syntax: space-separated pieces "$A", "$B", "[CLS]", each optionally ":<type_id>"
  // ("$A" defaults to type 0, "$B" to 1, special tokens to the type of the sequence before them).
  static PostTemplate parse(std::string_view single, std::string_view pair);
  static PostTemplate bert();          // [CLS] A [SEP] / [CLS] A [SEP] B [SEP]  types 0..0 1..1
  static PostTemplate roberta();       // <s> A </s> / <s> A </s> </s> B </s>
  static PostTemplate bos_eos();       // <s> A </s> / <s> A </s> B </s>
  static PostTemplate gpt_finetune();  // [START] A [EXTRACT] / [START] A [DELIM] B [EXTRACT]
  bool empty() const { return single.empty() && pair.empty(); }
  std::vector<std::string> special_tokens() const;
  std::string to_string(bool pair) const;  // back to HF syntax
};

}  // namespace qkv::text
