// tests/tasks/decode_bench_shapes.h - the decode bench's Transformer shape and a GPT of its width,
// for the bf16 and int8 inference tests.
#pragma once
#include <cstdint>

#include "qkv/models/gpt.h"
#include "qkv/models/transformer.h"

namespace qkv::testing {

// Width 256, 4 heads, FFN 1024, shared embeddings, positions up to 64, no dropout; `layers`
// encoder and decoder layers and a vocabulary of `vocab` (smaller than the bench's).
inline models::TransformerConfig decode_bench_transformer(int64_t layers, int64_t vocab) {
  models::TransformerConfig cfg;
  cfg.src_vocab = cfg.tgt_vocab = vocab;
  cfg.d_model = 256, cfg.heads = 4, cfg.enc_layers = cfg.dec_layers = layers, cfg.d_ff = 1024;
  cfg.dropout = 0.0;
  cfg.shared_embeddings = true;
  cfg.max_len = 64;
  return cfg;
}

// Vocabulary 1000, positions up to 64, width 256, 4 heads, `layers` layers.
inline models::GptConfig decode_bench_gpt(int64_t layers) {
  models::GptConfig cfg;
  cfg.vocab_size = 1000, cfg.n_positions = 64, cfg.n_embd = 256, cfg.n_layer = layers, cfg.n_head = 4;
  return cfg;
}

}  // namespace qkv::testing
