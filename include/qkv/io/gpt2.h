// qkv/io/gpt2.h - GPT model directories in the published GPT-2 layout (Hugging Face's
// GPT2LMHeadModel), both ways:
//
//   config.json        GPT2Config keys (models::GptConfig); save_gpt2 adds bos_token_id and
//                      eos_token_id from the tokenizer's specials, if it has them
//   model.safetensors  wte.weight (V, D), wpe.weight (P, D), h.{i}.ln_1.{weight,bias},
//                      h.{i}.attn.c_attn.{weight (D, 3D), bias (3D)}, h.{i}.attn.c_proj (D, D),
//                      h.{i}.ln_2, h.{i}.mlp.c_fc (D, inner), h.{i}.mlp.c_proj (inner, D), ln_f
//                      (pre-LN only). Conv1D weights are stored (in, out); c_attn's columns are
//                      [q | k | v]. Names with or without the "transformer." prefix; the causal-
//                      mask buffers h.{i}.attn.bias / masked_bias are ignored; lm_head.weight, if
//                      stored, must be the token embedding (the head is tied) and is not written.
//   tokenizer.json, or encoder.json + vocab.bpe   (optional; byte-level BPE)
// Unknown and missing names, and wrong shapes, are errors naming the file and the tensor.
#pragma once
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "qkv/models/gpt.h"
#include "qkv/text/tokenizer.h"

namespace qkv::safetensors {
class Reader;
}

namespace qkv::io {

struct GptBundle {
  models::GptConfig config;
  std::shared_ptr<models::Gpt> model;
  std::shared_ptr<text::Tokenizer> tokenizer;  // null when the directory has none
};

// The published tensors (any prefix handling done) -> qkv's state dict for a Gpt of `cfg`.
std::map<std::string, Tensor> gpt2_to_qkv(const std::map<std::string, Tensor>& published, const models::GptConfig& cfg,
                                          const std::string& where);
// qkv's Gpt -> the published tensors, without prefix (what save_gpt2 writes).
std::map<std::string, Tensor> qkv_to_gpt2(const models::Gpt& model);

// The Gpt of `cfg` read from `file` one tensor at a time, straight into its parameters (the file is
// never held beside the model). in_file maps every published name (no prefix: "wte.weight",
// "h.0.attn.c_attn.weight", ...) to the tensor's name in the file; it is checked against the
// config from the header first: unknown, misshapen, non-F32 and missing tensors are errors naming
// them, and a stored lm_head.weight must equal wte.weight. precision bf16: the model is built to
// hold its weights in bf16 (nn::Module::hold_weights_in_bf16) before any is read, and each is
// rounded as it is read, so the f32 weights are never in memory; int8 likewise holds them in int8
// (hold_weights_in_int8), each quantized a piece of whole rows at a time as it is read; fp32: f32.
std::shared_ptr<models::Gpt> read_gpt2_body(
    const safetensors::Reader& file, const std::map<std::string, std::string>& in_file, const models::GptConfig& cfg,
    kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32);

// config.json of a GPT directory, checked (GPT2Config's keys and validate()); errors name `path`.
models::GptConfig read_gpt2_config(const std::string& path);
// precision: as read_gpt2_body's (bf16 / int8: weights held in bf16 / int8 from the start).
GptBundle load_gpt2(const std::string& dir, kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32);
// Writes config.json, model.safetensors and (if any) tokenizer.json into dir, each atomically.
void save_gpt2(const std::string& dir, const GptBundle& bundle);

}  // namespace qkv::io
