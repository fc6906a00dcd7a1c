// qkv/tasks/generator.h - a loaded GPT answering batches of prompts (the shape of CTranslate2's
// Generator): the one way `qkv generate`, the benches and (later) the server generate text.
//
//   qkv::tasks::Generator g("models/gpt2");              // io::load_gpt2, once
//   qkv::tasks::GenerateOptions o;
//   o.max_new_tokens = 40; o.sample = true; o.top_p = 0.9; o.seed = 7;
//   auto r = g.generate({"Once upon a time", "The answer is"}, o);
//   std::cout << r[0].text << "\n";
//
// Prompts of a batch are left-padded and decoded together with the KV cache (models::Gpt::start /
// step): padding is never attended to and each row's positions count from its first token, so a
// prompt's completion does not depend on the batch it is in. Logits are processed as
// decode/logits_process.h says (Hugging Face's semantics). A row ends at the eos token, when its
// text contains a stop string (cut from the text), or after max_new_tokens (clamped so prompt +
// completion fit n_positions). Sampling: prompt i of a call draws from its own Philox stream
// (key = seed, counters from i * 2^32), so batched sampling equals one prompt at a time.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "qkv/decode/logits_process.h"
#include "qkv/io/gpt2.h"
#include "qkv/kernels/gemm.h"
#include "qkv/kernels/bf16.h"

namespace qkv::tasks {

struct Generation;

// A generated token, as streaming sees it.
struct TokenEvent {
  size_t prompt = 0;      // index of the prompt in the call (sampling n > 1 completions of each:
                          // of the completion, i * n + j)
  int64_t token = 0;      // the id just generated
  std::string_view text;  // new text it completes (may be empty: an unfinished UTF-8 character or a
                          // possible start of a stop string is held back); the pieces of a row
                          // concatenate to its final text
  bool last = false;      // the row ends with this token
  // The row so far: tokens up to this one, its log-probabilities with this token's (when asked),
  // the prompt's (complete before the first event). Valid during the call.
  const Generation* generation = nullptr;
};

struct GenerateOptions {
  int64_t max_new_tokens = 64;    // per prompt; clamped to n_positions - prompt length
  int64_t min_new_tokens = 0;     // eos is removed until this many tokens are generated (Hugging
                                  // Face's min_new_tokens; stop strings and the length still end)
  bool sample = false;            // false: greedy (the penalties, then the first maximum)
  decode::LogitsOptions logits;   // temperature / top_k / top_p (sampling), repetition, presence and
                                  // frequency penalties (both)
  // Hugging Face's no_repeat_ngram_size (0 = off): a token that would complete an n-gram already in
  // the text (prompt + generated) is removed, after the penalties (decode::repeated_ngram_bans).
  int no_repeat_ngram_size = 0;
  std::vector<std::string> stop;  // stop strings (need a tokenizer)
  static constexpr int64_t kModelEos = -2;
  int64_t eos_id = kModelEos;     // kModelEos: config.json's eos_token_id if any; -1: none
  uint64_t seed = 0;
  int64_t batch_size = 8;         // prompts decoded together
  bool truncate_long = false;     // a prompt longer than n_positions - 1: keep its last tokens (and
                                  // warn) instead of an error
  bool quiet = false;             // no warnings on stderr
  std::function<void(const TokenEvent&)> on_token;  // streaming: called for every generated token
  // Log-probabilities (OpenAI's completions "logprobs" and "echo"), under the model's own
  // distribution: log_softmax of the logits at temperature 1, before the repetition penalty and
  // the filters (what scoring wants; the choice itself is made on the processed logits).
  // logprobs: -1 off; 0 each generated token's; n > 0 also the n most likely tokens at each step.
  int64_t logprobs = -1;
  // Each prompt token's after the first (a forward pass over the prompt alone, so the values do
  // not depend on the batch); with logprobs > 0, the most likely tokens too.
  bool prompt_logprobs = false;
  // Matrix products in fp32, or in bf16 (kernels/bf16.h): every weight converted once to bf16 in
  // oneDNN's layout and cached with the model (rebuilt only when a weight changes), activations
  // rounded per product, f32 accumulation; softmax, layer norm and reductions stay fp32. bf16 needs
  // AMX or AVX512_BF16 (a qkv::Error otherwise).
  // Or int8 (kernels/int8.h): the weights of at least kernels::int8_min_weight_elements() values
  // quantized once per output channel and cached likewise, activations per row, exact int32 sums;
  // smaller weights and products of two activations stay fp32. int8 needs AVX512-VNNI or AMX.
  kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32;

  // Beam search (num_beams > 1), as Hugging Face's generate(num_beams=...) searches (its
  // vectorised _beam_search): each step ranks the 2K best (beam, token) extensions of a prompt's K
  // beams by cumulative log_softmax after the penalties, n-gram blocking and min_new_tokens (the
  // processors see log-probabilities, not logits, as in Hugging Face); an extension that ends (eos,
  // or the length limit) among the first K is a finished hypothesis scored
  // sum / (generated tokens, eos included) ^ length_penalty, the K best kept; the K best that do
  // not end go on. early_stopping: heuristic (HF's False) stops once the best running beam,
  // scored at its current length, cannot beat the worst of K finished; first (HF's True) stops as
  // soon as K are finished; never (HF's "never") scores the running beam at the length limit when
  // length_penalty > 0. Beam search chooses; it does not sample (sample must be false), stream
  // (on_token must be unset) or stop at strings (stop must be empty).
  int64_t num_beams = 1;
  double length_penalty = 1.0;  // > 0 favours longer hypotheses, < 0 shorter
  enum class EarlyStopping { heuristic, first, never };
  EarlyStopping early_stopping = EarlyStopping::heuristic;
  // Completions per prompt: beam search's best n hypotheses (n <= num_beams), or n samples (each
  // from its own random stream, as n copies of the prompt). Greedy decoding has one. The result
  // holds prompt i's j-th at i * n + j.
  int64_t num_return_sequences = 1;
};

struct Generation {
  std::string text;             // the completion (prompt excluded, stop string and eos cut), as
                                // Hugging Face's pipeline cuts it from the decoded prompt +
                                // completion: a word-level tokenizer's joining space leads it; bytes
                                // the tokens decode to that are not UTF-8 become U+FFFD
                                // (utf8::replace_invalid, as Hugging Face's decode)
  std::vector<int64_t> tokens;  // generated ids (eos included if generated)
  std::string finish;           // "eos", "stop" or "length"
  int64_t prompt_tokens = 0;    // after truncation
  bool truncated = false;
  std::vector<decode::TokenLogprob> logprobs;         // per generated token (GenerateOptions::logprobs)
  std::vector<decode::TokenLogprob> prompt_logprobs;  // per prompt token after the first
  std::vector<int64_t> prompt_ids;                    // the prompt as decoded (after truncation)
  double score = 0;  // beam search: the hypothesis's score (above); otherwise 0
};

// A generation's log-probabilities as OpenAI's legacy completions "logprobs" object:
// {"tokens": [text], "token_logprobs": [...], "top_logprobs": [{text: logprob}], "text_offset":
// [...]}. echo (OpenAI's): the prompt's tokens first, its very first with null for both logprobs
// (nothing precedes it). A token's text is its decoding alone, specials included; bytes that are
// not UTF-8 alone (a piece of a character) become U+FFFD; top candidates whose texts are the same
// are listed once, with the most likely one's logprob. text_offset: where each token starts in
// the choice's text (Generation::text, after the decoded prompt with echo: its special tokens'
// texts included, as a prompt written with them holds them), in Unicode code points
// (what a Python str indexes): after the text of the tokens before it (after the space, where a
// word-level tokenizer joins words with one); a special token (eos) where the text has got to;
// every byte of a character split over tokens at that character. Streaming sends a generation in
// parts: the generated tokens [from, to) of g.logprobs (to clamped to their count), and the echoed
// prompt's tokens only with list_prompt; every part's offsets are those of the whole.
nlohmann::json logprobs_json(const text::Tokenizer& tok, const Generation& g, bool echo, size_t from = 0,
                             size_t to = SIZE_MAX, bool list_prompt = true);

class Generator {
 public:
  // io::load_gpt2 + config.json's bos/eos ids. precision bf16 / int8: the weights held in bf16 /
  // int8 as they are read (hold_weights_in_bf16 / _in_int8 below, without the f32 model in memory
  // first).
  explicit Generator(const std::string& model_dir, kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32);
  // Puts the model in eval mode and sets its decoding products' layouts (nn::Module::set_pack_layout
  // with decoding_layout, for each precision). The model is shared, so this holds for its other
  // users too; their decoding results may differ in the last bits.
  explicit Generator(io::GptBundle bundle, int64_t eos_id = -1, int64_t bos_id = -1);
  // fp32 (and int8's fp32 products): panels (a packed copy) for a model of at most 64 MiB of f32
  // weights, which can stay in the last-level cache between tokens; rows (the weights read in
  // place, no copy) for a larger one. bf16: rows (a bf16 copy of the rows) whatever the size;
  // int8: rows (s8 rows, qkv's batch-1 kernel) whatever the size.
  static kernels::PackLayout decoding_layout(const models::Gpt& model,
                                             kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32);

  // Text prompts (encoded with the model's tokenizer; an empty prompt starts from bos if known).
  std::vector<Generation> generate(const std::vector<std::string>& prompts, const GenerateOptions& opt = {}) const;
  // Token prompts; text and stop strings need a tokenizer (without one, text stays empty).
  std::vector<Generation> generate_ids(const std::vector<std::vector<int64_t>>& prompts,
                                       const GenerateOptions& opt = {}) const;

  // bf16 inference in half the weight memory (nn::Module::hold_weights_in_bf16): afterwards every
  // call must ask for precision bf16 (an fp32 or int8 call is an error naming a weight). The
  // commands call it when --precision is bf16.
  void hold_weights_in_bf16() { bundle_.model->hold_weights_in_bf16(); }
  // int8 inference in a quarter of the weight memory (nn::Module::hold_weights_in_int8), likewise:
  // afterwards every call must ask for precision int8.
  void hold_weights_in_int8() { bundle_.model->hold_weights_in_int8(); }
  const io::GptBundle& bundle() const { return bundle_; }
  int64_t eos_id() const { return eos_; }

 private:
  // generate_ids, where each prompt stands `copies` times in a row (num_return_sequences samples):
  // messages name its line once, as prompts[i / copies].
  std::vector<Generation> generate_ids(const std::vector<std::vector<int64_t>>& prompts, const GenerateOptions& opt,
                                       size_t copies) const;
  io::GptBundle bundle_;
  int64_t eos_ = -1, bos_ = -1;
  // Ids of a padded vocabulary (config vocab_size above the tokenizer's) that no token decodes to:
  // their logits are -inf before anything is chosen, listed or scored, unless one is the eos id.
  std::vector<int64_t> undecodable_ = {};
  std::string model_dir_;  // where the model was read from ("" for a bundle in memory): for messages
};

}  // namespace qkv::tasks
