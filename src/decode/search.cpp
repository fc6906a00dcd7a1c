#include "qkv/decode/search.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>

#include "qkv/autograd/node.h"
#include "qkv/kernels/elementwise.h"
#include "qkv/kernels/parallel.h"
#include "qkv/kernels/token_scores.h"

namespace qkv::decode {
namespace {


std::vector<int64_t> source_lengths(const Tensor& src_pad) {
  Tensor pad = src_pad.contiguous();
  const uint8_t* p = pad.data<uint8_t>();
  int64_t B = pad.size(0), S = pad.size(1);
  std::vector<int64_t> len(size_t(B), 0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) len[size_t(b)] += p[b * S + s] == 0;
  return len;
}

Tensor tokens_tensor(const std::vector<int64_t>& v) {
  return Tensor::from_vector(v, Shape{int64_t(v.size())});
}

void check_inputs(const Tensor& src, const Tensor& src_pad, const Options& opt) {
  check_dtype(src, DType::i64, "decode", "src");
  check_dtype(src_pad, DType::u8, "decode", "src_pad");
  QKV_CHECK(src.ndim() == 2 && src_pad.shape() == src.shape(), "decode", "src ", src.str(), " and src_pad ",
            src_pad.str(), " must both be (B, S)");
  QKV_CHECK(opt.beam >= 1, "decode", "beam must be >= 1, got ", opt.beam);
  QKV_CHECK(opt.nbest >= 1 && opt.nbest <= opt.beam, "decode", "nbest must be in [1, beam = ", opt.beam, "], got ",
            opt.nbest);
  QKV_CHECK(opt.patience > 0 && opt.patience <= 64, "decode", "patience must be in (0, 64], got ", opt.patience);
  QKV_CHECK(opt.beam == 1 || opt.nbest <= endings_kept(opt), "decode", "nbest ", opt.nbest, " is more than the ",
            endings_kept(opt), " endings beam search keeps (round(patience ", opt.patience, " x beam ", opt.beam,
            ")): raise patience or lower nbest");
  QKV_CHECK(!opt.sample || opt.beam == 1, "decode", "sampling needs beam 1, got beam ", opt.beam);
  QKV_CHECK(opt.temperature > 0, "decode", "temperature must be > 0, got ", opt.temperature);
  QKV_CHECK(opt.top_p > 0 && opt.top_p <= 1, "decode", "top_p must be in (0, 1], got ", opt.top_p);
  QKV_CHECK(opt.top_k >= 0, "decode", "top_k must be >= 0 (0 = all tokens), got ", opt.top_k);
  QKV_CHECK(opt.no_repeat_ngram_size >= 0, "decode", "no_repeat_ngram_size must be >= 0 (0 = off), got ",
            opt.no_repeat_ngram_size);
  QKV_CHECK(std::isfinite(opt.alpha), "decode", "alpha (the length penalty's exponent) must be finite, got ",
            opt.alpha);
  QKV_CHECK(std::isfinite(opt.max_len_ratio) && opt.max_len_ratio >= 0, "decode",
            "max_len_ratio must be a finite number >= 0, got ", opt.max_len_ratio);
  QKV_CHECK(opt.max_len_extra >= 0, "decode", "max_len_extra must be >= 0, got ", opt.max_len_extra);
}

// Draws a token from one row of logits with temperature, top-k and top-p.
int64_t sample_row(const float* logits, int64_t V, const Options& opt, Generator& gen, double& logp_out) {
  std::vector<double> z(static_cast<size_t>(V));
  double mx = -INFINITY;
  for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(logits[v]) / opt.temperature);
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += (z[size_t(v)] = std::exp(double(logits[v]) / opt.temperature - mx));
  std::vector<int64_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return z[size_t(a)] > z[size_t(b)]; });
  int64_t keep = opt.top_k > 0 ? std::min<int64_t>(opt.top_k, V) : V;
  if (opt.top_p < 1.0) {  // smallest prefix whose probability reaches top_p
    double cum = 0;
    for (int64_t i = 0; i < keep; ++i) {
      cum += z[size_t(order[size_t(i)])] / sum;
      if (cum >= opt.top_p) { keep = i + 1; break; }
    }
  }
  double kept = 0;
  for (int64_t i = 0; i < keep; ++i) kept += z[size_t(order[size_t(i)])];
  double u = gen.uniform1() * kept, acc = 0;
  int64_t pick = order[size_t(keep - 1)];
  for (int64_t i = 0; i < keep; ++i) {
    acc += z[size_t(order[size_t(i)])];
    if (u < acc) { pick = order[size_t(i)]; break; }
  }
  logp_out = std::log(z[size_t(pick)] / kept);
  return pick;
}

}  // namespace

std::vector<int64_t> repeated_ngram_bans(const std::vector<int64_t>& t, int n) {
  std::vector<int64_t> bans;
  if (n < 1 || int64_t(t.size()) < n - 1) return bans;
  const size_t k = size_t(n - 1), len = t.size();  // the last k tokens, followed by v, must be new
  for (size_t i = 0; i + k < len; ++i)
    if (std::equal(t.begin() + int64_t(i), t.begin() + int64_t(i + k), t.end() - int64_t(k))) bans.push_back(t[i + k]);
  std::sort(bans.begin(), bans.end());
  bans.erase(std::unique(bans.begin(), bans.end()), bans.end());
  return bans;
}

double length_penalty(int64_t len, double alpha) {
  return alpha == 0 ? 1.0 : std::pow((5.0 + double(len)) / 6.0, alpha);
}

int64_t max_target_len(const models::Seq2Seq& model, int64_t src_len, const Options& opt) {
  // In double until the model's cap: a huge ratio must not overflow the conversion.
  const double lim = std::ceil(opt.max_len_ratio * double(src_len)) + double(opt.max_len_extra);
  return std::max<int64_t>(1, int64_t(std::min(lim, double(model.max_len() - 1))));
}

namespace {

// The tokens no hypothesis may contain (SpecialIds, Options::allow_unk), sorted.
std::vector<int64_t> never_generated(SpecialIds ids, const Options& opt) {
  std::vector<int64_t> never;
  for (int64_t t : {ids.bos, ids.pad, opt.allow_unk ? int64_t(-1) : ids.unk})
    if (t >= 0 && t != ids.eos) never.push_back(t);
  std::sort(never.begin(), never.end());
  never.erase(std::unique(never.begin(), never.end()), never.end());
  return never;
}

// The bans of the hypothesis `tokens`: `never`, and with n-gram blocking (ngram > 0) the tokens
// that would repeat an n-gram; built in `scratch` only when there are n-gram bans to add.
// Where a row's n-gram bans leave no token with probability mass (a hypothesis longer
// than the vocabulary it may still use), those give way and `never` alone holds; only a row whose
// every token with mass is in `never` takes one of them. The kernels' own fallback (every token
// banned: choose as if none were) put <pad> and <unk> into translations.
const std::vector<int64_t>& row_bans(const std::vector<int64_t>& never, const std::vector<int64_t>& tokens, int ngram,
                                     std::vector<int64_t>& scratch) {
  if (ngram == 0) return never;
  const std::vector<int64_t> repeats = repeated_ngram_bans(tokens, ngram);
  scratch.clear();
  std::set_union(never.begin(), never.end(), repeats.begin(), repeats.end(), std::back_inserter(scratch));
  return scratch;
}

// Whether the per-row scoring of a step (`elements` logits) goes on the OpenMP pool: only when
// it is large and entering the pool is cheap (idle threads spin; kernels/parallel.h).
bool rows_on_pool(int64_t elements) {
  return elements >= kernels::kParallelGrain && kernels::idle_threads_spin();
}

struct Setup {
  int64_t B;
  std::vector<int64_t> limit;
  int64_t max_steps;
};
Setup setup(const models::Seq2Seq& model, const Tensor& src, const Tensor& src_pad, SpecialIds ids,
            const Options& opt) {
  check_inputs(src, src_pad, opt);
  // An id past the vocabulary was taken: an eos of 99 in 12 tokens ended nothing.
  const int64_t V = model.tgt_vocab();
  QKV_CHECK(ids.bos >= 0 && ids.bos < V, "decode", "bos id must be in [0, ", V, "), got ", ids.bos);
  for (auto [name, id] : {std::pair{"eos", ids.eos}, std::pair{"pad", ids.pad}, std::pair{"unk", ids.unk}})
    QKV_CHECK(id >= -1 && id < V, "decode", name, " id must be -1 (none) or in [0, ", V, "), got ", id);
  QKV_CHECK(opt.beam <= model.tgt_vocab(), "decode", "beam must be at most the target vocabulary (",
            model.tgt_vocab(), " tokens), got ", opt.beam);
  Setup s;
  s.B = src.size(0);
  std::vector<int64_t> src_len = source_lengths(src_pad);
  for (int64_t b = 0; b < s.B; ++b) s.limit.push_back(max_target_len(model, src_len[size_t(b)], opt));
  s.max_steps = s.B ? *std::max_element(s.limit.begin(), s.limit.end()) : 0;
  return s;
}
}  // namespace

std::vector<std::vector<Hypothesis>> translate(models::Seq2Seq& model, const Tensor& src, const Tensor& src_pad,
                                               SpecialIds ids, const Options& opt) {
  QKV_CHECK(opt.beam >= 1, "decode", "beam must be >= 1, got ", opt.beam);  // before nbest's range names it
  QKV_CHECK(opt.nbest >= 1 && opt.nbest <= opt.beam, "decode", "nbest must be in [1, beam = ", opt.beam, "], got ",
            opt.nbest);
  return opt.beam == 1 ? greedy(model, src, src_pad, ids, opt) : beam_search(model, src, src_pad, ids, opt);
}

// Greedy (argmax) or, with opt.sample, ancestral sampling: one row per sentence still being
// decoded. A sentence that ends leaves the batch (its row is dropped from the decoder state), so
// a batch costs what its live sentences cost, not what its longest one does times B.
std::vector<std::vector<Hypothesis>> greedy(models::Seq2Seq& model, const Tensor& src, const Tensor& src_pad,
                                            SpecialIds ids, const Options& opt) {
  Options o = opt;
  o.beam = o.nbest = 1;
  // Named copies, not a structured binding: clang 14 (the fuzzing build) cannot capture a
  // binding in the OpenMP region below.
  Setup setup_ = setup(model, src, src_pad, ids, o);
  const int64_t B = setup_.B, max_steps = setup_.max_steps;
  std::vector<int64_t>& limit = setup_.limit;
  NoGradGuard no_grad;
  auto state = model.start(src, src_pad);
  std::vector<std::vector<Hypothesis>> finished(static_cast<size_t>(B));

  QKV_CHECK(opt.streams.empty() || int64_t(opt.streams.size()) == B, "decode", "streams: expected one per sentence (",
            B, "), got ", opt.streams.size());
  std::vector<Generator> gens(opt.sample ? size_t(B) : 0);  // sentence b's own random stream
  for (int64_t b = 0; b < int64_t(gens.size()); ++b)
    gens[size_t(b)].set_state(opt.seed, (opt.streams.empty() ? uint64_t(b) : opt.streams[size_t(b)]) << 32);
  std::vector<Hypothesis> hyp(static_cast<size_t>(B));
  std::vector<int64_t> live(static_cast<size_t>(B));  // row r decodes sentence live[r]
  std::iota(live.begin(), live.end(), int64_t(0));
  std::vector<int64_t> last(size_t(B), ids.bos), step_tok(size_t(B), 0);  // per row
  std::vector<double> step_lp(size_t(B), 0.0);
  const int ngram = opt.no_repeat_ngram_size;
  const std::vector<int64_t> never = never_generated(ids, opt);
  for (int64_t t = 0; t < max_steps && !live.empty(); ++t) {
    Tensor logits = model.step(*state, tokens_tensor(last)).contiguous();  // (R, V)
    const int64_t R = int64_t(live.size()), V = logits.size(1);
    float* X = logits.data<float>();
    if (!opt.sample) {  // rows are independent
      kernels::parallel_for_if(rows_on_pool(R * V), R, [&](int64_t r) {
        std::vector<int64_t> scratch;
        const auto& bans = row_bans(never, hyp[size_t(live[size_t(r)])].tokens, ngram, scratch);
        kernels::best_token(X + r * V, V, step_tok[size_t(r)], step_lp[size_t(r)], &bans);
        if (&bans != &never && std::binary_search(bans.begin(), bans.end(), step_tok[size_t(r)]))
          kernels::best_token(X + r * V, V, step_tok[size_t(r)], step_lp[size_t(r)], &never);  // see row_bans
      });
    }
    std::vector<int64_t> keep;  // rows whose sentence goes on
    for (int64_t r = 0; r < R; ++r) {
      const int64_t b = live[size_t(r)];
      Hypothesis& h = hyp[size_t(b)];
      int64_t tok = step_tok[size_t(r)];
      double lp = step_lp[size_t(r)];
      if (opt.sample) {  // one draw per live sentence, from its own stream
        std::vector<int64_t> scratch;
        const auto& bans = row_bans(never, h.tokens, ngram, scratch);
        // Banned tokens get no probability mass (row_bans: the n-gram bans give way first).
        auto allowed_mass = [&](const std::vector<int64_t>& banned) {
          for (int64_t v = 0; v < V; ++v)
            if (X[r * V + v] > -INFINITY && !std::binary_search(banned.begin(), banned.end(), v)) return true;
          return false;
        };
        const std::vector<int64_t>* kept = allowed_mass(bans) ? &bans : allowed_mass(never) ? &never : nullptr;
        if (kept)
          for (int64_t v : *kept)
            if (v < V) X[r * V + v] = -INFINITY;
        tok = sample_row(X + r * V, V, opt, gens[size_t(b)], lp);
      }
      h.tokens.push_back(tok);
      h.logprob += lp;
      last[size_t(r)] = tok;
      if (tok != ids.eos && int64_t(h.tokens.size()) < limit[size_t(b)]) keep.push_back(r);
    }
    if (int64_t(keep.size()) == R) continue;
    for (size_t i = 0; i < keep.size(); ++i) {  // compact: the rows that go on, in order
      live[i] = live[size_t(keep[i])];
      last[i] = last[size_t(keep[i])];
    }
    live.resize(keep.size());
    last.resize(keep.size());
    if (!keep.empty()) state->select_rows(keep);
  }
  for (int64_t b = 0; b < B; ++b) {
    hyp[size_t(b)].score = hyp[size_t(b)].logprob;
    finished[size_t(b)] = {hyp[size_t(b)]};
  }
  return finished;
}

std::vector<std::vector<Hypothesis>> beam_search(models::Seq2Seq& model, const Tensor& src, const Tensor& src_pad,
                                                 SpecialIds ids, const Options& opt) {
  QKV_CHECK(!opt.sample, "beam_search", "sampling is not a beam search (set beam 1)");
  // Named copies, not a structured binding: clang 14 (the fuzzing build) cannot capture a
  // binding in the OpenMP region below.
  Setup setup_ = setup(model, src, src_pad, ids, opt);
  const int64_t B = setup_.B, max_steps = setup_.max_steps;
  std::vector<int64_t>& limit = setup_.limit;
  const int64_t K = opt.beam;
  const int64_t n_finish = endings_kept(opt);
  // Candidates ranked per step: the walk below takes at most K live ones and K endings (one per
  // row) before the limit, and n_finish endings at the limit, where every candidate ends.
  const size_t n_cand = size_t(std::max<int64_t>(2 * K, n_finish));
  NoGradGuard no_grad;
  auto state = model.start(src, src_pad);
  std::vector<std::vector<Hypothesis>> finished(static_cast<size_t>(B));

  // Beam search over the sentences still searching: slot j decodes sentence live[j] in rows
  // j*K .. j*K+K-1. A sentence whose search ends leaves the batch (its K rows are dropped from the
  // decoder state). Only beam 0 starts alive, so the first step does not pick the same token K times.
  std::vector<int64_t> live(static_cast<size_t>(B));
  std::iota(live.begin(), live.end(), int64_t(0));
  std::vector<int64_t> rows(static_cast<size_t>(B * K));
  for (int64_t i = 0; i < B * K; ++i) rows[size_t(i)] = i / K;
  state->select_rows(rows);
  std::vector<double> score(size_t(B * K), -INFINITY);  // cumulative log-prob of each live row
  for (int64_t b = 0; b < B; ++b) score[size_t(b * K)] = 0;
  std::vector<std::vector<int64_t>> toks(static_cast<size_t>(B * K));
  std::vector<int64_t> last(size_t(B * K), ids.bos);
  struct Cand { double s; int64_t row, tok; };
  std::vector<Cand> cands;
  std::vector<std::vector<std::pair<float, int64_t>>> top(static_cast<size_t>(B * K));  // per row: (log-prob, token)
  const std::vector<int64_t> never = never_generated(ids, opt);

  for (int64_t t = 0; t < max_steps && !live.empty(); ++t) {
    Tensor logits = model.step(*state, tokens_tensor(last)).contiguous();  // (R, V), R = live * K
    const float* X = logits.data<float>();
    const int64_t V = logits.size(1), R = int64_t(live.size()) * K;
    std::vector<int64_t> next_rows(static_cast<size_t>(R));
    std::vector<double> next_score(size_t(R), -INFINITY);
    std::vector<std::vector<int64_t>> next_toks(static_cast<size_t>(R));
    std::vector<int64_t> next_last(size_t(R), ids.eos);
    // The 2K best tokens of every live row; rows are independent: on the pool when it is cheap.
    kernels::parallel_for_if(rows_on_pool(R * V), R, [&](int64_t r) {
      if (score[size_t(r)] == -INFINITY) return;
      std::vector<int64_t> scratch;
      const auto& bans = row_bans(never, toks[size_t(r)], opt.no_repeat_ngram_size, scratch);
      kernels::top_tokens(X + r * V, V, n_cand, top[size_t(r)], &bans);
      const auto& got = top[size_t(r)];  // kernels::top_tokens took every token: the bans left none
      if (&bans != &never && !got.empty() && std::binary_search(bans.begin(), bans.end(), got.front().second))
        kernels::top_tokens(X + r * V, V, n_cand, top[size_t(r)], &never);
    });
    std::vector<int64_t> keep;  // slots whose search goes on
    for (int64_t j = 0; j < int64_t(live.size()); ++j) {
      const int64_t b = live[size_t(j)], base = j * K;
      // The n_cand best (row, token) extensions: K of them can end in </s> and K still remain
      // (n_finish all end at the limit). They are among the n_cand best tokens of each row (the
      // row's score is a constant offset).
      cands.clear();
      for (int64_t k = 0; k < K; ++k) {
        double s0 = score[size_t(base + k)];
        if (s0 == -INFINITY) continue;
        for (const auto& [lp, tok] : top[size_t(base + k)]) cands.push_back({s0 + double(lp), base + k, tok});
      }
      const size_t n_ranked = std::min(cands.size(), n_cand);
      // Ties break towards the lower row, then the lower token id (deterministic).
      std::partial_sort(cands.begin(), cands.begin() + int64_t(n_ranked), cands.end(), [](const Cand& x, const Cand& y) {
        if (x.s != y.s) return x.s > y.s;
        if (x.row != y.row) return x.row < y.row;
        return x.tok < y.tok;
      });
      int64_t alive = 0;
      const bool at_limit = t + 1 >= limit[size_t(b)];
      for (size_t c = 0; c < n_ranked && alive < K; ++c) {
        const Cand& cd = cands[c];
        std::vector<int64_t> seq = toks[size_t(cd.row)];
        seq.push_back(cd.tok);
        if (cd.tok == ids.eos || at_limit) {
          if (int64_t(finished[size_t(b)].size()) < n_finish) {
            Hypothesis h{seq, cd.s, cd.s / length_penalty(int64_t(seq.size()), opt.alpha)};
            finished[size_t(b)].push_back(std::move(h));
          }
          continue;
        }
        next_rows[size_t(base + alive)] = cd.row;
        next_score[size_t(base + alive)] = cd.s;
        next_toks[size_t(base + alive)] = std::move(seq);
        next_last[size_t(base + alive)] = cd.tok;
        ++alive;
      }
      for (int64_t k = alive; k < K; ++k) next_rows[size_t(base + k)] = base;  // dead rows: any row will do
      if (!(int64_t(finished[size_t(b)].size()) >= n_finish || alive == 0 || at_limit)) keep.push_back(j);
    }
    if (keep.size() < live.size()) {  // compact: the slots that go on, in order
      size_t row = 0;
      for (size_t i = 0; i < keep.size(); ++i) {
        live[i] = live[size_t(keep[i])];
        for (int64_t k = 0; k < K; ++k, ++row) {
          const size_t from = size_t(keep[i] * K + k);
          next_rows[row] = next_rows[from];
          next_score[row] = next_score[from];
          if (row != from) next_toks[row] = std::move(next_toks[from]);  // a self-move would empty it
          next_last[row] = next_last[from];
        }
      }
      live.resize(keep.size());
      for (auto* v : {&next_rows, &next_last}) v->resize(row);
      next_score.resize(row);
      next_toks.resize(row);
    }
    if (live.empty()) break;
    state->select_rows(next_rows);
    score = std::move(next_score);
    toks = std::move(next_toks);
    last = std::move(next_last);
  }
  for (int64_t b = 0; b < B; ++b) {
    auto& f = finished[size_t(b)];
    std::stable_sort(f.begin(), f.end(), [](const Hypothesis& x, const Hypothesis& y) { return x.score > y.score; });
    if (int64_t(f.size()) > opt.nbest) f.resize(size_t(opt.nbest));
  }
  return finished;
}

}  // namespace qkv::decode
