// qkv/models/gpt_vocab.h - growing a GPT's vocabulary for added tokens (e.g. [START], [DELIM],
// [EXTRACT] of fine-tuning; Hugging Face's resize_token_embeddings):
//
//   E_tok' = [ E_tok ; N(0, 0.02) rows ]      (V', D), V' >= V
//
// The old rows stay bit-identical, the tied LM head grows with the embedding (it is E_tok), and
// the config's vocab_size becomes V'. Every other tensor is copied unchanged.
#pragma once
#include <memory>

#include "qkv/models/gpt.h"

namespace qkv::models {

// A new Gpt with vocab_size new_vocab (>= the model's) and the weights of `model`; the new rows
// are drawn from `gen`. Returns a copy even when nothing grows, in the mode (train/eval) of `model`.
std::shared_ptr<Gpt> grow_vocab(const Gpt& model, int64_t new_vocab, Generator& gen = default_generator());

}  // namespace qkv::models
