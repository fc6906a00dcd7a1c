// Beam search over a GPT (GenerateOptions::num_beams > 1; the algorithm is stated in
// qkv/tasks/generator.h): batches of prompts, each as K rows of the KV cache; a prompt whose
// search ends leaves the batch.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "generator_search.h"
#include "qkv/autograd/node.h"
#include "qkv/kernels/elementwise.h"
#include "qkv/kernels/parallel.h"

namespace qkv::tasks::detail {

namespace {

constexpr double kFiller = -1e9;  // Hugging Face's score for beams that are not real (yet)

struct Beam {
  std::vector<int64_t> tokens;  // generated so far
  std::vector<decode::TokenLogprob> logprobs;
  double score = 0;             // cumulative processed log-probability (kFiller added if it ended)
};

// One prompt's search.
struct Search {
  const BeamPrompt* prompt = nullptr;
  std::vector<Beam> running;             // K, best first
  std::vector<BeamHypothesis> finished;  // at most K, best first
  bool done = false;
};

struct Candidate {
  double score;  // beam score + processed log-probability
  int64_t beam, token;
};

// log_softmax of a row (in double, stored as f32 like Hugging Face's scores), then the processors.
void processed_log_probs(const float* logits, int64_t V, const Search& s, const Beam& b, int64_t eos,
                         const GenerateOptions& opt, std::vector<float>& out, std::vector<int64_t>& history) {
  double mx = -INFINITY;
  for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(logits[v]));
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(double(logits[v]) - mx);
  const double lse = mx + std::log(sum);
  out.resize(size_t(V));
  for (int64_t v = 0; v < V; ++v) out[size_t(v)] = float(double(logits[v]) - lse);
  const std::vector<int64_t>& prompt = *s.prompt->ids;
  history.assign(prompt.begin(), prompt.end());
  history.insert(history.end(), b.tokens.begin(), b.tokens.end());
  apply_processors(out.data(), V, history, prompt.size(), eos, opt);
}

bool ranks_before(const Candidate& x, const Candidate& y, int64_t V) {  // ties: the lower beam * V + token
  if (x.score != y.score) return x.score > y.score;
  return x.beam * V + x.token < y.beam * V + y.token;
}

// One step of a prompt's search from its K rows of logits (K, V) at generated length g. Returns
// the beam (0..K-1) each new running beam extends.
std::vector<int64_t> advance(Search& s, const float* logits, int64_t V, int64_t g, int64_t eos,
                             const GenerateOptions& opt) {
  const int64_t K = opt.num_beams;
  const size_t n_top = size_t(2 * K);
  // A beam's 2K best tokens hold all it can place among the 2K best; beams are independent (on
  // the pool when the rows are large).
  std::vector<std::vector<Candidate>> per_beam(static_cast<size_t>(K));
  kernels::parallel_for_if(K * V >= kernels::kParallelGrain && kernels::idle_threads_spin(), K, [&](int64_t k) {
    const Beam& b = s.running[size_t(k)];
    std::vector<float> lp;
    std::vector<int64_t> history, idx(static_cast<size_t>(V));
    processed_log_probs(logits + k * V, V, s, b, eos, opt, lp, history);
    std::iota(idx.begin(), idx.end(), int64_t(0));
    const size_t m = std::min(n_top, idx.size());
    std::partial_sort(idx.begin(), idx.begin() + int64_t(m), idx.end(), [&](int64_t x, int64_t y) {
      return lp[size_t(x)] != lp[size_t(y)] ? lp[size_t(x)] > lp[size_t(y)] : x < y;
    });
    for (size_t i = 0; i < m; ++i) per_beam[size_t(k)].push_back({b.score + double(lp[size_t(idx[i])]), k, idx[i]});
  });
  std::vector<Candidate> cands;
  for (const auto& c : per_beam) cands.insert(cands.end(), c.begin(), c.end());
  const size_t m = std::min(n_top, cands.size());
  std::partial_sort(cands.begin(), cands.begin() + int64_t(m), cands.end(),
                    [V](const Candidate& x, const Candidate& y) { return ranks_before(x, y, V); });
  cands.resize(m);
  const int64_t max_new = s.prompt->max_new;
  std::vector<char> hit(m);
  for (size_t c = 0; c < m; ++c) hit[c] = cands[c].token == eos || g + 1 >= max_new;

  auto extended = [&](const Candidate& c) {  // the candidate's beam with its token
    const Beam& parent = s.running[size_t(c.beam)];
    Beam b{parent.tokens, parent.logprobs, c.score};
    b.tokens.push_back(c.token);
    if (opt.logprobs >= 0) b.logprobs.push_back(decode::token_logprob(logits + c.beam * V, V, c.token, opt.logprobs));
    return b;
  };
  // Finished: the hits among the first K. (Hugging Face also stops taking them once the search
  // has stopped improving; here the prompt has left the batch by then.)
  for (size_t c = 0; c < std::min(m, size_t(K)); ++c) {
    if (!hit[c]) continue;
    Beam b = extended(cands[c]);
    s.finished.push_back({std::move(b.tokens), std::move(b.logprobs),
                          cands[c].score / std::pow(double(g + 1), opt.length_penalty)});
  }
  std::stable_sort(s.finished.begin(), s.finished.end(),
                   [](const BeamHypothesis& x, const BeamHypothesis& y) { return x.score > y.score; });
  if (int64_t(s.finished.size()) > K) s.finished.resize(size_t(K));
  // Running: the K best after the hits lose kFiller (so they are taken only if nothing else is).
  std::vector<size_t> order(m);
  std::iota(order.begin(), order.end(), size_t(0));
  auto adjusted = [&](size_t c) { return cands[c].score + (hit[c] ? kFiller : 0.0); };
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return adjusted(x) > adjusted(y); });
  std::vector<Beam> next;
  std::vector<int64_t> parents;
  for (size_t i = 0; i < size_t(K); ++i) {
    next.push_back(extended(cands[order[i]]));
    next.back().score = adjusted(order[i]);
    parents.push_back(cands[order[i]].beam);
  }
  s.running = std::move(next);
  // Done: every candidate ended; or K are finished and early_stopping is first, or no running
  // beam can beat the worst of them by Hugging Face's heuristic.
  const bool full = int64_t(s.finished.size()) == K;
  bool hopeless = false;
  if (full) {
    const bool to_limit = opt.early_stopping == GenerateOptions::EarlyStopping::never && opt.length_penalty > 0;
    const double len = double(to_limit ? max_new : g + 1);
    hopeless = !(s.running[0].score / std::pow(len, opt.length_penalty) > s.finished.back().score);
  }
  s.done = std::all_of(hit.begin(), hit.end(), [](char h) { return h != 0; }) || hopeless ||
           (full && opt.early_stopping == GenerateOptions::EarlyStopping::first);
  return parents;
}

}  // namespace

std::vector<std::vector<BeamHypothesis>> beam_search(const models::Gpt& model, const std::vector<BeamPrompt>& prompts,
                                                     int64_t eos, const GenerateOptions& opt,
                                                     const std::vector<int64_t>& suppressed) {
  const int64_t K = opt.num_beams, V = model.config().vocab_size;
  std::vector<std::vector<BeamHypothesis>> out(prompts.size());
  NoGradGuard ng;
  for (size_t start = 0; start < prompts.size(); start += size_t(opt.batch_size)) {
    const size_t end = std::min(prompts.size(), start + size_t(opt.batch_size));
    std::vector<Search> searches(end - start);
    std::vector<const std::vector<int64_t>*> ids;
    for (size_t i = start; i < end; ++i) {
      Search& s = searches[i - start];
      s.prompt = &prompts[i];
      s.running.assign(size_t(K), Beam{});
      for (int64_t k = 1; k < K; ++k) s.running[size_t(k)].score = kFiller;  // only beam 0 starts
      ids.push_back(prompts[i].ids);
    }
    models::GptCache cache;
    Tensor logits = prefill(model, ids, cache);  // (B, 1, V)
    // Each prompt's row becomes its K beams' (the same logits for all).
    std::vector<int64_t> rows;
    for (size_t j = 0; j < searches.size(); ++j) rows.insert(rows.end(), size_t(K), int64_t(j));
    const Tensor row_index = Tensor::from_vector<int64_t>(rows, {int64_t(rows.size())});
    cache.select_rows(row_index);
    std::vector<size_t> live(searches.size());  // slot j decodes searches[live[j]]
    std::iota(live.begin(), live.end(), size_t(0));
    std::vector<float> step(size_t(K * V));
    for (int64_t g = 0; !live.empty(); ++g) {
      Tensor lg = logits.contiguous();  // (rows, 1, V): one per prompt at g = 0, then K
      suppress_ids(lg, suppressed);
      const float* src = lg.data<float>();
      std::vector<size_t> keep;
      std::vector<int64_t> cache_rows, last, pos;
      for (size_t j = 0; j < live.size(); ++j) {
        for (int64_t k = 0; k < K; ++k) {
          const int64_t r = g > 0 ? int64_t(j) * K + k : int64_t(j);
          std::copy(src + r * V, src + (r + 1) * V, step.begin() + k * V);
        }
        Search& s = searches[live[j]];
        const std::vector<int64_t> parents = advance(s, step.data(), V, g, eos, opt);
        if (s.done) {
          out[start + live[j]] = std::move(s.finished);
          continue;
        }
        keep.push_back(live[j]);
        for (int64_t k = 0; k < K; ++k) {  // the cache holds K rows per live prompt
          cache_rows.push_back(int64_t(j) * K + parents[size_t(k)]);
          last.push_back(s.running[size_t(k)].tokens.back());
          pos.push_back(int64_t(s.prompt->ids->size()) + g);
        }
      }
      live = std::move(keep);
      if (live.empty()) break;
      const int64_t R = int64_t(cache_rows.size());
      cache.select_rows(Tensor::from_vector<int64_t>(cache_rows, {R}));
      logits = model.step(Tensor::from_vector<int64_t>(last, {R, 1}), cache, Tensor::from_vector<int64_t>(pos, {R, 1}),
                          Tensor(), /*last_only=*/true);
    }
  }
  return out;
}

}  // namespace qkv::tasks::detail
