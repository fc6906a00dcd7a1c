// qkv/decode/search.h - greedy, beam and sampling decoders over any models::Seq2Seq.
//
// Lengths count generated tokens including </s>. A sentence of source length S may generate at
// most min(model.max_len() - 1, ceil(max_len_ratio * S) + max_len_extra) tokens; a hypothesis
// that reaches the limit without </s> is finished there.
// Beam scores are sum log p / lp(len), lp = ((5 + len) / 6)^alpha (Wu et al. 2016, GNMT);
// alpha = 0 ranks by raw log-probability.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "qkv/models/seq2seq.h"
#include "qkv/tensor/rng.h"

namespace qkv::decode {

struct Options {
  int beam = 1;                 // 1 = greedy
  double alpha = 0.6;           // GNMT length-penalty exponent (beam only)
  double max_len_ratio = 1.5;   // of the source length
  int64_t max_len_extra = 10;
  int nbest = 1;                // hypotheses returned per sentence (<= beam)
  // Beam search stops a sentence once round(patience * beam) hypotheses have ended in </s>
  // (Kasai et al. 2022, "A Call for Clarity in Beam Search"; 1 = fairseq's rule). Above 1 the
  // search goes on past the first short endings, which a length penalty then ranks against
  // longer ones; the live beam stays `beam` wide.
  double patience = 1.0;
  // Sampling (beam must be 1): temperature, top-k (0 = off), nucleus top-p (1 = off).
  bool sample = false;
  double temperature = 1.0;
  int top_k = 0;
  double top_p = 1.0;
  uint64_t seed = 0;
  // Sampling: sentence b of the batch draws from random stream streams[b] of `seed` (Philox
  // counters from streams[b] * 2^32, as qkv generate numbers a prompt's), b when empty. The
  // translator passes each sentence's index in its input, so that its sample does not depend on
  // the other sentences or the batch size.
  std::vector<uint64_t> streams;
  // No hypothesis repeats an n-gram of its target tokens (fairseq's and CTranslate2's
  // no_repeat_ngram_size; 0 = off): a token that would complete an n-gram already generated is
  // not chosen. Search ranks the model's own log-probabilities of the allowed tokens; sampling
  // draws from the allowed tokens renormalised.
  int no_repeat_ngram_size = 0;
  // Whether a hypothesis may contain the unknown token (SpecialIds::unk). Off, as in Marian
  // (--allow-unk): the model's `<unk>` stands for no word in particular, and detokenizing drops
  // it, so an output that chose it would silently lose a word; search takes the best real token.
  bool allow_unk = false;
};

// The tokens that would complete an n-gram of `tokens` already present in it (n >= 1), sorted.
std::vector<int64_t> repeated_ngram_bans(const std::vector<int64_t>& tokens, int n);

struct Hypothesis {
  std::vector<int64_t> tokens;  // without <s>, with </s> if it was generated
  double logprob = 0;           // sum of token log-probabilities
  double score = 0;             // logprob / lp(len) for beam; logprob otherwise
};

// No hypothesis ever contains <s> (it only starts the decoder's input) or <pad> (it only fills
// batches): search and sampling pass over them (fairseq bans <pad> the same way; Hugging Face's
// Marian configurations ban it through bad_words_ids), and the log-probabilities stay the
// model's own. eos -1: no token ends a hypothesis; pad -1: the vocabulary has none. The unknown
// token is passed over the same way unless Options::allow_unk (unk -1: none; an unk that is also
// </s>, as GPT-2's <|endoftext|> is, still ends hypotheses).
struct SpecialIds {
  int64_t bos, eos, pad = -1, unk = -1;
};

// The endings beam search keeps per sentence before it stops: round(patience * beam), at least 1.
// nbest can be no more (checked where options are read).
inline int64_t endings_kept(const Options& o) {
  return std::max<int64_t>(1, std::llround(o.patience * double(o.beam)));
}

// src (B, S) i64, src_pad (B, S) u8 (1 = pad). Returns nbest hypotheses per sentence, best first.
std::vector<std::vector<Hypothesis>> translate(models::Seq2Seq& model, const Tensor& src, const Tensor& src_pad,
                                               SpecialIds ids, const Options& opt);

// The two algorithms translate() dispatches to (beam == 1 -> greedy/sampling). beam_search
// accepts any beam >= 1; with beam 1 it must equal greedy (a test checks).
std::vector<std::vector<Hypothesis>> greedy(models::Seq2Seq& model, const Tensor& src, const Tensor& src_pad,
                                            SpecialIds ids, const Options& opt);
std::vector<std::vector<Hypothesis>> beam_search(models::Seq2Seq& model, const Tensor& src, const Tensor& src_pad,
                                                 SpecialIds ids, const Options& opt);

// The length limit above, for a source of `src_len` real tokens.
int64_t max_target_len(const models::Seq2Seq& model, int64_t src_len, const Options& opt);
double length_penalty(int64_t len, double alpha);


}  // namespace qkv::decode
