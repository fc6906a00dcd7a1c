// qkv/io/bert.h - BERT model directories in Hugging Face's published layout (BertModel,
// BertForPreTraining, BertForMaskedLM, ...), both ways:
//
//   config.json        BertConfig keys (models::BertConfig)
//   model.safetensors  bert.embeddings.{word_embeddings, position_embeddings, token_type_embeddings}.weight,
//                      bert.embeddings.LayerNorm.{weight, bias} (old files: gamma, beta),
//                      bert.encoder.layer.{i}.attention.self.{query, key, value}.{weight, bias},
//                      bert.encoder.layer.{i}.attention.output.{dense, LayerNorm}.*,
//                      bert.encoder.layer.{i}.intermediate.dense.*, bert.encoder.layer.{i}.output.{dense, LayerNorm}.*,
//                      bert.pooler.dense.*; MLM head: cls.predictions.bias,
//                      cls.predictions.transform.{dense, LayerNorm}.*, cls.predictions.decoder.weight
//                      (tied to the word embeddings: may be absent, must be equal if present);
//                      NSP head: cls.seq_relationship.{weight, bias}.
//                      Names with or without the "bert." prefix (BertModel saves none); the
//                      buffers embeddings.position_ids / token_type_ids are ignored.
//   tokenizer.json, or vocab.txt (WordPiece)      (optional)
// Linear weights are (out, in) in both layouts, so the mapping renames and never transposes.
//
// Loading builds the encoder and the heads asked for. The encoder's tensors must all be there;
// the pooler's and the heads' may be missing (newly initialised) and tensors of heads not asked
// for are ignored: the returned report lists each. Unknown encoder tensors, wrong shapes, a
// config key qkv does not know and a tokenizer with more ids than vocab_size are errors naming
// the file and the tensor or key.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qkv/models/bert.h"
#include "qkv/text/tokenizer.h"

namespace qkv::io {

struct BertHeads {
  bool mlm = true;     // cls.predictions
  bool nsp = true;     // cls.seq_relationship
  bool pooler = true;  // bert.pooler (false: a file's pooler tensors are ignored, as the task heads
                       // that read every position build none: BertForTokenClassification)
};

// Task heads built by the caller, by published prefix (e.g. {"classifier", a Linear}): their
// parameters are "<prefix>.<name>", loaded when the file has them, else kept as given (newly
// initialised); other tensors under the prefix are errors. Saved with the model.
using BertTaskHeads = std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>>;

// What load_bert did with each tensor, by published name (with the "bert." prefix).
struct BertLoadReport {
  std::vector<std::string> loaded;       // read from the file into the model
  std::vector<std::string> initialised;  // the model has it, the file does not: newly initialised
  std::vector<std::string> ignored;      // in the file, not used (heads not built, other heads, buffers)
  // "loaded N tensors", then the initialised and ignored names, one per line.
  std::string summary() const;
};

struct BertBundle {
  models::BertConfig config;
  std::shared_ptr<models::Bert> bert;
  std::shared_ptr<models::BertMlmHead> mlm;  // null unless asked for
  std::shared_ptr<models::BertNspHead> nsp;  // null unless asked for
  std::shared_ptr<text::Tokenizer> tokenizer;  // null when the directory has none
  BertLoadReport report;
  BertTaskHeads task_heads;
  nlohmann::json config_extra = nlohmann::json::object();  // save_bert merges it into config.json last
                                                           // (architectures, id2label, ...)
};

// A new bundle with random weights (Hugging Face's initialisation) and the heads asked for.
BertBundle make_bert(const models::BertConfig& cfg, BertHeads heads = {}, Generator& gen = default_generator(),
                     BertTaskHeads task = {});

// The model's parameters under their published names ("bert."-prefixed, cls.* for the heads
// present): the parameter tensors themselves, not copies (save_bert writes them; tests read
// their gradients). The tied decoder weight is not listed (Hugging Face does not store it).
std::map<std::string, Tensor> bert_published_parameters(const BertBundle& b);
// A name as the published layout spells it: the "bert." prefix added to a bare encoder name,
// LayerNorm.gamma/beta -> weight/bias. Other names unchanged.
std::string canonical_bert_name(const std::string& name);

// config.json of a BERT directory, checked (BertConfig's keys and validate()); errors name `path`.
models::BertConfig read_bert_config(const std::string& path);
// precision bf16 / int8: the encoder, the heads and the task heads hold their weights in bf16 /
// int8 (nn::Module::hold_weights_in_bf16 / _in_int8) before any is read, each rounded / quantized
// as it is read, so the f32 weights are never in memory; fp32: f32 weights.
BertBundle load_bert(const std::string& dir, BertHeads heads = {}, BertTaskHeads task = {},
                     kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32);
// Writes config.json, model.safetensors and (if any) tokenizer.json (+ vocab.txt for WordPiece)
// into dir, each atomically.
void save_bert(const std::string& dir, const BertBundle& bundle);
// The tokenizer files of a BERT directory: tokenizer.json, and vocab.txt for WordPiece (each atomically).
void save_bert_tokenizer(const std::string& dir, const text::Tokenizer& tokenizer);

}  // namespace qkv::io
