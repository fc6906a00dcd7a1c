// Generator's internals shared by its greedy/sampling loop (generator.cpp) and its beam search
// (generator_beam.cpp). Not installed.
#pragma once
#include <cstdint>
#include <vector>

#include "qkv/decode/logits_process.h"
#include "qkv/models/gpt.h"
#include "qkv/tasks/generator.h"

namespace qkv::tasks::detail {

// Feeds the prompts (each non-empty), left-padded to the longest, into a fresh cache: positions
// count from each row's first real token and padding is never attended to. Returns the logits
// (B, 1, V) of each row's last prompt position.
Tensor prefill(const models::Gpt& model, const std::vector<const std::vector<int64_t>*>& prompts,
               models::GptCache& cache);

// logits (rows, L, V), contiguous, with -inf at the given ids on every row: ids of a padded
// vocabulary that no token decodes to (Generator::undecodable_).
void suppress_ids(Tensor& logits, const std::vector<int64_t>& ids);

// What every way of choosing does to a row of scores (V) before it chooses, in this order: the
// logit bias and the penalties (decode::apply_penalties), n-gram blocking (a token completing an
// n-gram already in `history` gets -inf), and eos at -inf until min_new_tokens are generated.
// `history` is prompt + generated, its first `prompt_len` tokens the prompt; eos -1: none.
void apply_processors(float* row, int64_t V, const std::vector<int64_t>& history, size_t prompt_len, int64_t eos,
                      const GenerateOptions& opt);

// One prompt of a beam search: its tokens (after truncation) and its length limit.
struct BeamPrompt {
  const std::vector<int64_t>* ids = nullptr;
  int64_t max_new = 0;
};

// A finished hypothesis: generated tokens (eos included if it ended there), their
// log-probabilities under the model's own distribution (when opt.logprobs >= 0) and its score.
struct BeamHypothesis {
  std::vector<int64_t> tokens;
  std::vector<decode::TokenLogprob> logprobs;
  double score = 0;
};

// GenerateOptions' beam search (generator.h) over the prompts, opt.batch_size prompts (each as
// opt.num_beams rows) decoded together; eos -1: none. Returns each prompt's num_beams finished
// hypotheses, best first. Options are validated by the caller. `suppressed`: suppress_ids' ids.
std::vector<std::vector<BeamHypothesis>> beam_search(const models::Gpt& model, const std::vector<BeamPrompt>& prompts,
                                                     int64_t eos, const GenerateOptions& opt,
                                                     const std::vector<int64_t>& suppressed);

}  // namespace qkv::tasks::detail
