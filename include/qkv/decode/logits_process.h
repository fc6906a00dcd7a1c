// qkv/decode/logits_process.h - what generation does to one row of next-token logits (V) before it
// chooses, with Hugging Face's semantics (its logits processors and warpers, in its order):
//
//   0. logit bias (OpenAI's logit_bias, first, as vLLM applies it): a fixed amount added to chosen
//      tokens' logits (-100 all but bans a token, +100 all but forces it);
//   1. repetition penalty (CTRL, Keskar et al. 2019): every distinct token already in the text
//      (prompt + generated) has its logit divided by the penalty if >= 0, else multiplied by it;
//   1b. presence and frequency penalties (OpenAI's, in vLLM's place, after step 1): a token the
//      completion has generated c > 0 times so far (the prompt not counted) loses
//      c * frequency_penalty + presence_penalty from its logit;
//   2. temperature: logits / T;
//   3. top-k: tokens whose logit is below the k-th largest are removed (ties with it stay);
//   4. top-p (nucleus, Holtzman et al. 2020): the smallest set of most probable tokens whose
//      probability reaches p is kept, always at least one token.
// Removed tokens get -inf. Greedy decoding applies steps 0 to 1b and takes the first maximum; sampling
// draws from the softmax of the processed row.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace qkv::decode {

struct LogitsOptions {
  double temperature = 1.0;         // > 0
  int64_t top_k = 0;                // 0 = off
  double top_p = 1.0;               // (0, 1]; 1 = off
  double repetition_penalty = 1.0;  // > 0; 1 = off
  double presence_penalty = 0.0;    // finite; 0 = off (OpenAI allows [-2, 2])
  double frequency_penalty = 0.0;   // finite; 0 = off
  std::vector<std::pair<int64_t, double>> logit_bias = {};  // (token, finite bias); a token at most once
  void validate() const;            // throws qkv::Error naming the option
  void validate(int64_t vocab_size) const;  // and the bias's tokens in [0, vocab_size)
};

// Step 1 over the tokens of `history` (repeats counted once; ids outside [0, V) throw).
void apply_repetition_penalty(float* logits, int64_t V, const std::vector<int64_t>& history, double penalty);
// Step 1b over the `generated` tokens of the completion so far (ids outside [0, V) throw).
void apply_presence_frequency_penalty(float* logits, int64_t V, const int64_t* generated, size_t n, double presence,
                                      double frequency);
// Steps 0, 1 and 1b in their order, over a row's `history` (prompt + generated) whose first
// `prompt_len` tokens are the prompt: what greedy decoding and sampling both apply.
void apply_penalties(float* logits, int64_t V, const std::vector<int64_t>& history, size_t prompt_len,
                     const LogitsOptions& opt);
// Steps 2-4 (what sampling adds to greedy's steps 1 and 1b).
void warp_logits(float* logits, int64_t V, const LogitsOptions& opt);
// The first maximum of the row (token 0 if no entry is finite or above -inf).
int64_t argmax_token(const float* logits, int64_t V);
// Inverse-CDF draw from softmax(logits), tokens in id order: the first token whose cumulative
// probability exceeds u (u uniform in [0, 1)); -inf entries are never drawn; if any entry is +inf,
// one of those, equally likely (softmax's limit). Steps 0-1b saturate at float's largest finite value.
int64_t sample_token(const float* logits, int64_t V, double u);

// A token's log-probability under log_softmax(logits) (the sum of exponentials in double), and the
// `top_n` most likely tokens with theirs, best first (equal logits: the lower id first; ids at -inf,
// which generation suppressed, are not listed).
struct TokenLogprob {
  int64_t token = 0;
  double logprob = 0;
  std::vector<std::pair<int64_t, double>> top;
};
TokenLogprob token_logprob(const float* logits, int64_t V, int64_t token, int64_t top_n = 0);

}  // namespace qkv::decode
