// qkv/text/finetune_tokens.h - the input transformation tokens of GPT fine-tuning (Radford et al.
// 2018, 3.3): [START] text [EXTRACT] and [START] a [DELIM] b [EXTRACT].
//
// The three are added tokens (never split, matched in the text before pre-tokenization, as Hugging
// Face's added_tokens are) with the roles start / delim / extract; a token the tokenizer does not
// know yet gets the next id after its vocabulary, so a model must grow its embedding to
// tok.vocab_size() (models/gpt_vocab.h). The template becomes "[START] $A [EXTRACT]" /
// "[START] $A [DELIM] $B [EXTRACT]", so encode_single / encode_pair produce the model's input and
// tokenizer.json carries both the tokens and the template.
#pragma once
#include <string>

#include "qkv/text/tokenizer.h"

namespace qkv::text {

struct FinetuneTokenNames {
  std::string start = "[START]", delim = "[DELIM]", extract = "[EXTRACT]";
};

// Three different non-empty names, else a qkv::Error from `where` (a config's section, before a
// tokenizer is learned, or add_finetune_tokens itself).
void check_finetune_token_names(const FinetuneTokenNames& names, const std::string& where);
// Registers the tokens and the template; returns how many new ids were added (0 if the tokenizer
// already had all three, e.g. one loaded from a fine-tuned model). Errors if two names coincide.
int add_finetune_tokens(Tokenizer& tok, const FinetuneTokenNames& names = {});

}  // namespace qkv::text
