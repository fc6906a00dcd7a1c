// qkv/io/model_dir.h - encoder-decoder model directories.
//
//   config.json        {"model_type": "transformer" | "rnn", "model": {...},
//                       "tokenizer": {"shared": bool, "protect": bool}, "format": "qkv-seq2seq-1"}
//   model.safetensors  parameters by scoped name
//   tokenizer.json     shared vocabulary, or source_tokenizer.json + target_tokenizer.json
// Loading checks every file and names the one that is missing or wrong.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "qkv/models/seq2seq.h"
#include "qkv/text/tokenizer.h"

namespace qkv::io {

struct Seq2SeqBundle {
  nlohmann::json config;  // the whole config.json
  std::shared_ptr<models::Seq2Seq> model;
  std::shared_ptr<text::Tokenizer> src_tok, tgt_tok;  // the same object when shared
  // Trained with printf conversions, options, URLs, addresses and paths behind placeholders
  // (text/placeholders.h): translation protects its input the same way and restores the output.
  bool protect_spans = false;
};

// Builds an untrained model from {"model_type": ..., "model": {...}}; `where` names the source.
// to_load: a Transformer to be loaded next, built without drawing (nn::init::Scheme::none: its
// matrices cost no memory until read); an RNN is drawn either way.
std::shared_ptr<models::Seq2Seq> make_seq2seq(const nlohmann::json& config, const std::string& where,
                                              bool to_load = false);
// The "model" section with every default filled in, as the model reads it (same checks).
nlohmann::json resolved_model_config(const nlohmann::json& config, const std::string& where);

// config.json of a translation model directory (transformer or rnn), parsed and checked as
// load_seq2seq does; errors name `path`.
nlohmann::json read_seq2seq_config(const std::string& path);
// precision bf16: a Transformer holds its weights in bf16 (nn::Module::hold_weights_in_bf16) before
// they are read, each rounded as it is read, so its f32 weights are never in memory; int8 likewise
// (models::Transformer::hold_weights_in_int8_blocked: quantized as read); an RNN and fp32: f32.
Seq2SeqBundle load_seq2seq(const std::string& dir,
                           kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32);
// Writes config.json, model.safetensors and the tokenizer file(s) into dir (each atomically).
void save_seq2seq(const std::string& dir, const Seq2SeqBundle& bundle);

}  // namespace qkv::io
