// qkv/tasks/translator.h - a loaded translation model answering batches: the one way the `qkv`
// command, training's validation, the benches and (later) the server translate (the shape of
// CTranslate2's and Marian's Translator).
//
//   qkv::tasks::Translator t("runs/demo/model");                 // loads the directory once
//   auto r = t.translate({"Cannot open file", "File not found"});  // greedy by default
//   std::cout << r.text[0] << "\n";
//
// Lines are tokenized with the model's source tokenizer and </s> appended; a line longer than the
// model allows is truncated (and counted) or refused. A model trained with protected spans
// (config "tokenizer": {"protect": true}) gets printf conversions, options, URLs, addresses and
// paths as placeholders, and the translation gets them back verbatim (text/placeholders.h).
// Sentences are decoded longest first in batches of similar length and returned in input order.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "qkv/decode/search.h"
#include "qkv/kernels/bf16.h"
#include "qkv/io/model_dir.h"
#include "qkv/train/seq2seq_data.h"

namespace qkv::tasks {

struct TranslateOptions {
  decode::Options search;     // greedy / beam / sampling, length limits, n-gram blocking
  int64_t batch_size = 32;    // sentences per batch
  bool refuse_long = false;   // a line longer than the model allows: error (else truncate + warn)
  bool quiet = false;         // no truncation warnings on stderr
  // </s> is an ordinary target token: every hypothesis runs to the length limit (fixed-length
  // timing in benches; vLLM's ignore_eos).
  bool ignore_eos = false;
  // Matrix products in fp32, or in bf16 (kernels/bf16.h): every weight converted once to bf16 in
  // oneDNN's layout and cached with the model (rebuilt only when a weight changes), activations
  // rounded per product, f32 accumulation; softmax, layer norm and reductions stay fp32. bf16 needs
  // AMX or AVX512_BF16 (a qkv::Error otherwise).
  // Or int8 (kernels/int8.h): the weights of at least kernels::int8_min_weight_elements() values
  // quantized once per output channel and cached likewise, activations per row, exact int32 sums;
  // smaller weights and products of two activations stay fp32. int8 needs AVX512-VNNI or AMX.
  kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32;
};

struct Translations {
  std::vector<std::string> text;                     // best hypothesis per input line
  std::vector<std::vector<decode::Hypothesis>> hyps;  // n-best per line, best first
  std::vector<std::vector<std::string>> hyp_text;     // each of hyps as text (protected spans restored)
  std::vector<std::vector<int64_t>> src_ids;          // encoded sources (for attention plots)
  int64_t truncated = 0;                             // lines cut to the model's maximum
};

// Forced decoding (Marian's scorer, CTranslate2's score_batch, fairseq's --score-reference): how
// likely the model finds a given translation. Natural logarithms.
struct ScoreOptions {
  int64_t batch_size = 32;      // pairs per forward pass (batched by length)
  bool refuse_long = false;     // a side longer than the model allows: error (else truncate + warn)
  bool quiet = false;           // no truncation warnings on stderr
  bool token_logprobs = false;  // also each target token's log-probability
  kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32;  // as TranslateOptions::precision
};

struct PairScore {
  double logprob = 0;   // sum of log p(y_t | y_<t, x) over the target's tokens, </s> included
  int64_t tokens = 0;   // target tokens scored (</s> included)
  bool truncated = false;  // a side was cut to the model's maximum (score, not score_ids)
  std::vector<double> token_logprobs;  // per target token, </s> last (ScoreOptions::token_logprobs)
};

struct Scores {
  std::vector<PairScore> pairs;  // in input order
  int64_t truncated = 0;         // pairs with a side cut to the model's maximum
};

class Translator {
 public:
  // io::load_seq2seq, eval mode. precision bf16 / int8: a Transformer's weights held in bf16 / int8
  // as they are read (see hold_weights_in_bf16 / _in_int8).
  explicit Translator(const std::string& model_dir,
                      kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32);
  // A model already in memory, e.g. the one being trained (its weights may change between calls).
  // The tokenizers may be missing when only translate_ids is called.
  explicit Translator(io::Seq2SeqBundle bundle);

  Translations translate(const std::vector<std::string>& lines, const TranslateOptions& opt = {}) const;
  // Sentences already encoded (source ids, each ending with </s>, as translate encodes them):
  // the n-best per sentence, best first, in input order, batched as translate batches lines.
  std::vector<std::vector<decode::Hypothesis>> translate_ids(const std::vector<std::vector<int64_t>>& src_ids,
                                                             const TranslateOptions& opt = {}) const;
  // Forced decoding of target[i] given source[i]: both tokenized as training tokenizes them (a
  // model trained with protected spans gets the spans both sides share as the same placeholders,
  // text::protect_pair) and </s> appended; the log-probability of every target token.
  Scores score(const std::vector<std::string>& sources, const std::vector<std::string>& targets,
               const ScoreOptions& opt = {}) const;
  // Pairs already encoded (each side ending with </s>, as score encodes them).
  std::vector<PairScore> score_ids(const std::vector<std::vector<int64_t>>& src_ids,
                                   const std::vector<std::vector<int64_t>>& tgt_ids,
                                   const ScoreOptions& opt = {}) const;
  // Whether a line (a pair: {source, target}) is longer than the model takes, encoded exactly as
  // translate (score) encodes it, protected spans included: what a server checks before queueing.
  bool source_too_long(std::string_view line) const;
  // A source line as translate encodes it (protected spans as placeholders), with </s>, not cut:
  // for a caller that checks the length itself (the attention viewer).
  std::vector<int64_t> source_ids(std::string_view line) const;
  std::pair<bool, bool> pair_too_long(std::string_view source, std::string_view target) const;
  // A pair as score encodes it (the protected spans the two sides share as the same placeholders),
  // each side with </s>, not cut: for a caller that checks the lengths itself (the attention viewer).
  std::pair<std::vector<int64_t>, std::vector<int64_t>> pair_ids(std::string_view source,
                                                                 std::string_view target) const;
  // A decoded target's text as translate prints it: the placeholders of `source`'s protected spans
  // (a model trained with them) put back; otherwise the text unchanged.
  std::string restore_spans(std::string target_text, std::string_view source) const;
  // The text of a hypothesis's tokens (</s> dropped).
  std::string detokenize(const std::vector<int64_t>& tokens) const;
  // Cross-attention heatmaps (one panel per layer and head, plus their average) of input line
  // `line` (1-based) of `lines` and its translation in `r`, drawn to `png`; returns the panel count.
  size_t draw_attention(const Translations& r, const std::vector<std::string>& lines, int64_t line,
                        const std::string& png) const;

  // bf16 inference in half the weight memory (nn::Module::hold_weights_in_bf16): afterwards every
  // call must ask for precision bf16 (an fp32 or int8 call is an error naming a weight). The
  // commands call it when --precision is bf16.
  void hold_weights_in_bf16();
  // int8 inference in 2 bytes a weight instead of 5 (models::Transformer::hold_weights_in_int8_blocked),
  // likewise: afterwards every call must ask for precision int8. An RNN model is left as it is.
  void hold_weights_in_int8();
  const io::Seq2SeqBundle& bundle() const { return bundle_; }
  train::SeqIds special_ids() const { return ids_; }

 private:
  void check_tokenizers(const char* who) const;
  // A source line as the model reads it (protected spans as placeholders, whose originals go to
  // `originals` when given), with </s>, cut to max_len tokens (*cut says so; 0: not cut).
  std::vector<int64_t> encode_source(std::string_view line, int64_t max_len, bool* cut,
                                     std::vector<std::string>* originals) const;
  // A pair as score reads it (text::protect_pair), each side with </s>, cut likewise.
  std::pair<std::vector<int64_t>, std::vector<int64_t>> encode_pair(std::string_view source, std::string_view target,
                                                                    int64_t max_len, bool* cut_source,
                                                                    bool* cut_target) const;
  io::Seq2SeqBundle bundle_;
  train::SeqIds ids_;
  int64_t unk_ = -1;  // the target tokenizer's unknown token (decode::Options::allow_unk), or none
};

// <pad>/<s>/</s> ids of a bundle's model config.
train::SeqIds special_ids(const io::Seq2SeqBundle& bundle);

}  // namespace qkv::tasks
