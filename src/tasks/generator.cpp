// qkv::tasks::Generator (see qkv/tasks/generator.h): batches of left-padded prompts decoded with
// the GPT's KV cache, one token per row and step; finished rows leave the batch.
#include "qkv/tasks/generator.h"

#include "generator_search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>

#include "qkv/autograd/node.h"
#include "qkv/decode/search.h"
#include "qkv/tensor/rng.h"
#include "qkv/util/file.h"
#include "qkv/util/utf8.h"

namespace qkv::tasks {

namespace {

// One prompt being completed.
struct Row {
  size_t prompt = 0;              // index in the call
  int64_t prompt_len = 0;         // L: tokens of the (possibly truncated) prompt
  int64_t max_new = 0;            // after clamping to the context
  std::vector<int64_t> history;   // prompt + generated (the repetition penalty's tokens)
  int32_t context = -1;           // text_context of the prompt: the text is decoded after it
  qkv::Generator rng;             // this prompt's own stream
  size_t emitted = 0;             // bytes of the text already passed to on_token
  Generation* out = nullptr;
};

// Length of s without a trailing incomplete UTF-8 sequence (byte-level BPE may split a character
// across tokens).
size_t complete_utf8(std::string_view s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back for the lead
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? n - back : n;
  }
  return n;
}

// Where the longest suffix of text that is a proper prefix of a stop string starts (text.size()
// if none): those bytes may become a stop string and are held back from streaming.
size_t stop_hold(const std::string& text, const std::vector<std::string>& stop) {
  size_t hold = text.size();
  for (const auto& s : stop)
    for (size_t k = std::min(s.size() - 1, text.size()); k >= 1; --k)
      if (text.compare(text.size() - k, k, s, 0, k) == 0) {
        hold = std::min(hold, text.size() - k);
        break;
      }
  return hold;
}

// The earliest occurrence of any stop string in text, or npos.
size_t find_stop(const std::string& text, const std::vector<std::string>& stop) {
  size_t at = std::string::npos;
  for (const auto& s : stop) at = std::min(at, text.find(s));
  return at;
}

// The prompt's last token that decodes to text (not a special), which a completion is decoded
// after (-1: none, or an id past the tokenizer's vocabulary, as a model's padded one may have).
int32_t text_context(const text::Tokenizer& tok, const std::vector<int64_t>& prompt) {
  for (auto it = prompt.rbegin(); it != prompt.rend(); ++it)
    if (!tok.is_special_id(int32_t(*it))) return *it >= 0 && *it < tok.model_vocab_size() ? int32_t(*it) : -1;
  return -1;
}

// The text of generated ids as they continue a prompt, cut the way Hugging Face's text-generation
// pipeline cuts a completion out of the decoded prompt + completion: the decoding of the prompt's
// last text token (context) followed by ids, less the context's own decoding. So a word-level
// tokenizer's joining space leads the completion, and a WordPiece "##" piece joins the prompt's
// last word. Byte-level decodings are concatenations: for them this is decode(ids).
// Ids no token decodes to (a padded vocabulary's eos) add no text.
bool decodes(const text::Tokenizer& tok, int64_t id) {
  return (id >= 0 && id < tok.model_vocab_size()) || tok.is_special_id(int32_t(id));
}

std::string decode_continuation(const text::Tokenizer& tok, int32_t context, std::span<const int64_t> ids) {
  std::vector<int32_t> d;
  d.reserve(ids.size() + 1);
  if (context >= 0) d.push_back(context);
  for (int64_t id : ids)
    if (decodes(tok, id)) d.push_back(int32_t(id));
  std::string all = tok.decode(d);
  if (context < 0) return all;
  const std::string before = tok.decode(std::span<const int32_t>(d.data(), 1));
  if (all.compare(0, before.size(), before) == 0) return all.substr(before.size());
  return tok.decode(std::span<const int32_t>(d).subspan(1));  // a decoder that rewrites the context: ids alone
}

// Beam search's completions (GenerateOptions::num_beams > 1): prompt i's j-th best at
// i * num_return_sequences + j, each with prompt i's fields of `prompts`.
std::vector<Generation> beam_generations(const io::GptBundle& bundle, const std::vector<Row>& rows,
                                         const std::vector<Generation>& prompts, int64_t eos,
                                         const GenerateOptions& opt, const std::vector<int64_t>& suppressed) {
  std::vector<detail::BeamPrompt> bp;
  for (const Row& r : rows) bp.push_back({&r.history, r.max_new});
  const auto hyps = detail::beam_search(*bundle.model, bp, eos, opt, suppressed);
  std::vector<Generation> out;
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = 0; j < size_t(opt.num_return_sequences) && j < hyps[i].size(); ++j) {
      const detail::BeamHypothesis& h = hyps[i][j];
      Generation g = prompts[i];
      g.tokens = h.tokens;
      g.logprobs = h.logprobs;
      g.score = h.score;
      const bool ended = eos >= 0 && !h.tokens.empty() && h.tokens.back() == eos;
      g.finish = ended ? "eos" : "length";
      if (bundle.tokenizer) {
        const std::span<const int64_t> dec(h.tokens.data(), h.tokens.size() - (ended ? 1 : 0));
        g.text = utf8::replace_invalid(decode_continuation(*bundle.tokenizer, rows[i].context, dec));
      }
      out.push_back(std::move(g));
    }
  return out;
}

}  // namespace

Generator::Generator(const std::string& model_dir, kernels::MatmulPrecision precision)
    : Generator(io::load_gpt2(model_dir, precision)) {
  model_dir_ = model_dir;
  // The special ids are not architecture: GptConfig ignores them; read them here.
  const std::string path = model_dir + "/config.json";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail(path, "is not valid JSON: ", e.what());
  }
  const int64_t V = bundle_.model->config().vocab_size;
  auto id = [&](const char* key) {  // absent or null: none
    if (!j.contains(key) || j[key].is_null()) return int64_t(-1);
    QKV_CHECK(j[key].is_number_integer() && j[key].get<int64_t>() >= 0 && j[key].get<int64_t>() < V, path,
              "field '", key, "': expected a token id in [0, ", V, ") or null, got ", j[key].dump());
    return j[key].get<int64_t>();
  };
  eos_ = id("eos_token_id");
  bos_ = id("bos_token_id");
}

Generator::Generator(io::GptBundle bundle, int64_t eos_id, int64_t bos_id)
    : bundle_(std::move(bundle)), eos_(eos_id), bos_(bos_id) {
  QKV_CHECK(bundle_.model != nullptr, "Generator", "needs a GPT model");
  bundle_.model->eval();
  if (const text::Tokenizer* tok = bundle_.tokenizer.get())
    for (int64_t v = 0; v < bundle_.model->config().vocab_size; ++v)
      if (!decodes(*tok, v)) undecodable_.push_back(v);
  for (auto p : {kernels::MatmulPrecision::fp32, kernels::MatmulPrecision::bf16, kernels::MatmulPrecision::int8})
    bundle_.model->set_pack_layout(decoding_layout(*bundle_.model, p), p);
}

kernels::PackLayout Generator::decoding_layout(const models::Gpt& model, kernels::MatmulPrecision precision) {
  // bf16: oneDNN's product of one row streams its blocked weights at 11-17 GB/s, the rows kernel
  // at 22-28 (GPT-2 124M's products, `bench_matmul gpt2stream`, Intel Xeon with AMX): GPT-2
  // generates in 10.6-12.3 ms/token against 25.6, cfg1 in 0.41-0.57 against 0.65-0.80
  // (BENCHMARKS.md). A row's bits do not depend on the batch; a batch of 8 prompts multiplies
  // about 2x slower than in oneDNN, which the rows kernel does not match at 8 rows.
  if (precision == kernels::MatmulPrecision::bf16) return kernels::PackLayout::rows;
  // int8: qkv's VNNI kernel over s8 rows multiplies one row 1.2-2.3x faster than oneDNN's blocked
  // form (GPT-2's 49 products of a token: 3.7-5.0 ms against 4.5-6.2, `bench_matmul gpt2stream`,
  // AMD EPYC Zen 4); the same exact int32 sums, so the same bits. From int8_rows_max_batch() rows
  // a rows pack multiplies through oneDNN reading the rows as plain weights.
  if (precision == kernels::MatmulPrecision::int8) return kernels::PackLayout::rows;
  // At batch 1 every weight is read once per token (kernels/gemm.h, PackLayout). A model whose
  // weights can stay in the last-level cache between tokens (GPT cfg1: 21.9 MB) reads panels
  // (AMD EPYC Zen 5, the two alternating: panels 0.225 ms/token in both sittings measured, rows
  // 0.22 in one and 0.25-0.26 in the other, when other tenants crowded the cache); the copy
  // costs such a model little memory. A larger model streams from DRAM, where the two are within
  // a few percent (bench_matmul gpt2stream), so it reads its weights in place and is held once
  // (GPT-2 124M: 500 MB, not 1 GB).
  constexpr int64_t kPanelsUpToBytes = int64_t(64) << 20;
  return model.num_parameters() * int64_t(sizeof(float)) <= kPanelsUpToBytes ? kernels::PackLayout::panels
                                                                             : kernels::PackLayout::rows;
}

std::vector<Generation> Generator::generate(const std::vector<std::string>& prompts,
                                            const GenerateOptions& opt) const {
  QKV_CHECK(bundle_.tokenizer != nullptr, "generate", model_dir_.empty() ? "the model" : model_dir_,
            " has no tokenizer (tokenizer.json, or encoder.json + vocab.bpe): text prompts need one");
  std::vector<std::vector<int64_t>> ids(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int32_t> e = bundle_.tokenizer->encode(prompts[i]);
    ids[i].assign(e.begin(), e.end());
  }
  return generate_ids(ids, opt);
}

namespace {

size_t code_points(std::string_view s) {  // of valid UTF-8: the bytes that start a character
  return size_t(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

// Where token i of ids starts in their decoded text (U+FFFD for bytes that are not UTF-8, as
// Generation::text), in code points: own_length before the end of the text of tokens 0..i (so a
// word-level tokenizer's joining space comes before it, and every byte of a split character is at
// that character). Specials: skipped, as Generation::text skips them (a special token adds no
// text: it starts at that text's end); or, for an echoed prompt (keep_specials), kept, as the
// prompt's own text holds them (a prompt written with "<|endoftext|>" in it).
// length(n): the decoded length of tokens 0..n-1 (in order, each prefix is decoded once).
class TokenStarts {
 public:
  TokenStarts(const text::Tokenizer& tok, const std::vector<int64_t>& ids, int32_t context = -1,
              bool keep_specials = false)
      : tok_(tok), ids_(ids), context_(context), keep_specials_(keep_specials) {}
  size_t start(size_t i, size_t own_length, bool special) {
    if (special && !keep_specials_) return length(i);
    const size_t through = length(i + 1);
    return through >= own_length ? through - own_length : 0;
  }
  size_t length(size_t n) {  // of tokens 0..n-1 (at most all of them)
    n = std::min(n, ids_.size());
    if (n == known_n_) return known_;
    if (n == next_n_) return next_;
    known_n_ = next_n_, known_ = next_;
    const std::span<const int64_t> d(ids_.data(), n);
    next_n_ = n, next_ = code_points(utf8::replace_invalid(decoded(d)));
    return next_;
  }

 private:
  std::string decoded(std::span<const int64_t> d) const {
    if (!keep_specials_) return decode_continuation(tok_, context_, d);
    std::vector<int32_t> ids;
    for (int64_t id : d)
      if (decodes(tok_, id)) ids.push_back(int32_t(id));
    return tok_.decode(ids, /*skip_special=*/false);
  }

  const text::Tokenizer& tok_;
  const std::vector<int64_t>& ids_;
  int32_t context_ = -1;  // ids continue a prompt ending in this token (decode_continuation)
  bool keep_specials_ = false;
  size_t known_n_ = 0, known_ = 0, next_n_ = 0, next_ = 0;
};

}  // namespace

nlohmann::json logprobs_json(const text::Tokenizer& tok, const Generation& g, bool echo, size_t from, size_t to,
                             bool list_prompt) {
  nlohmann::json tokens = nlohmann::json::array(), values = nlohmann::json::array(), top = nlohmann::json::array(),
                 offsets = nlohmann::json::array();
  auto text_of = [&](int64_t id) {
    const int32_t one[1] = {int32_t(id)};
    return decodes(tok, id) ? utf8::replace_invalid(tok.decode(one, false)) : std::string();
  };
  auto add_token = [&](int64_t id, TokenStarts& starts, size_t i, size_t shift) {
    std::string t = text_of(id);
    offsets.push_back(shift + starts.start(i, code_points(t), tok.is_special_id(int32_t(id))));
    tokens.push_back(std::move(t));
  };
  auto add_logprobs = [&](const decode::TokenLogprob& t) {
    values.push_back(t.logprob);
    // t.top runs from the most likely down: tokens whose texts are the same (byte tokens that are
    // each U+FFFD alone) keep the first, the most likely one's logprob.
    nlohmann::json best = nlohmann::json::object();
    for (const auto& [id, lp] : t.top) best.emplace(text_of(id), lp);
    top.push_back(best);
  };
  TokenStarts in_prompt(tok, g.prompt_ids, -1, /*keep_specials=*/true);
  if (echo && list_prompt && !g.prompt_ids.empty()) {
    add_token(g.prompt_ids[0], in_prompt, 0, 0);
    values.push_back(nullptr);
    top.push_back(nullptr);
    for (size_t i = 0; i < g.prompt_logprobs.size(); ++i) {
      add_token(g.prompt_logprobs[i].token, in_prompt, i + 1, 0);
      add_logprobs(g.prompt_logprobs[i]);
    }
  }
  // The generated tokens' offsets: in Generation::text, after the prompt's text when it leads.
  const size_t shift = echo ? in_prompt.length(g.prompt_ids.size()) : 0;
  TokenStarts in_text(tok, g.tokens, text_context(tok, g.prompt_ids));
  for (size_t i = from; i < std::min(to, g.logprobs.size()); ++i) {
    add_token(g.logprobs[i].token, in_text, i, shift);
    add_logprobs(g.logprobs[i]);
  }
  return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", top}, {"text_offset", offsets}};
}

std::vector<Generation> Generator::generate_ids(const std::vector<std::vector<int64_t>>& prompts,
                                                const GenerateOptions& opt) const {
  return generate_ids(prompts, opt, 1);
}

std::vector<Generation> Generator::generate_ids(const std::vector<std::vector<int64_t>>& prompts,
                                                const GenerateOptions& opt, size_t copies) const {
  const models::Gpt& model = *bundle_.model;
  const int64_t P = model.config().n_positions, V = model.config().vocab_size;
  opt.logits.validate(V);
  QKV_CHECK(opt.max_new_tokens >= 1, "generate", "max_new_tokens must be >= 1, got ", opt.max_new_tokens);
  QKV_CHECK(opt.batch_size >= 1, "generate", "batch size must be >= 1, got ", opt.batch_size);
  QKV_CHECK(opt.min_new_tokens >= 0, "generate", "min_new_tokens must be >= 0, got ", opt.min_new_tokens);
  QKV_CHECK(opt.no_repeat_ngram_size >= 0, "generate", "no_repeat_ngram_size must be >= 0 (0 = off), got ",
            opt.no_repeat_ngram_size);
  QKV_CHECK(opt.logprobs >= -1, "generate", "logprobs must be -1 (off), 0 or a count of top tokens, got ",
            opt.logprobs);
  kernels::check_task_precision(opt.precision, "generate");
  QKV_CHECK(opt.num_beams >= 1, "generate", "num_beams must be >= 1 (1 = no beam search), got ", opt.num_beams);
  // Wider than the vocabulary, the first step leaves beams without a token: their filler scores
  // (-1e9) came back as hypotheses.
  const int64_t usable = V - int64_t(undecodable_.size());  // a padded vocabulary's own ids are never chosen
  QKV_CHECK(opt.num_beams <= usable, "generate", "num_beams (", opt.num_beams, ") exceeds the vocabulary (", usable,
            " tokens)");
  QKV_CHECK(opt.num_return_sequences >= 1, "generate", "num_return_sequences must be >= 1, got ",
            opt.num_return_sequences);
  if (opt.num_beams > 1) {
    QKV_CHECK(!opt.sample, "generate", "beam search chooses its tokens; it does not sample (num_beams > 1 needs "
              "sampling off)");
    QKV_CHECK(!opt.on_token, "generate", "beam search knows its completions only when it ends; it cannot stream "
              "them (num_beams > 1 needs on_token unset)");
    QKV_CHECK(opt.stop.empty(), "generate", "stop strings are not supported with beam search (num_beams > 1)");
    QKV_CHECK(opt.num_return_sequences <= opt.num_beams, "generate", "num_return_sequences (",
              opt.num_return_sequences, ") must not exceed num_beams (", opt.num_beams, ")");
    QKV_CHECK(std::isfinite(opt.length_penalty), "generate", "length_penalty must be finite, got ",
              opt.length_penalty);
  }
  QKV_CHECK(opt.stop.empty() || bundle_.tokenizer, "generate", "stop strings need the model's tokenizer");
  for (size_t i = 0; i < opt.stop.size(); ++i) {
    QKV_CHECK(!opt.stop[i].empty(), "generate", "stop string ", i + 1, " is empty");
    // A stop of stray bytes would match inside a character and cut it in half.
    QKV_CHECK(utf8::is_valid(opt.stop[i]), "generate", "stop string ", i + 1, " is not valid UTF-8");
  }
  const int64_t eos = opt.eos_id == GenerateOptions::kModelEos ? eos_ : opt.eos_id;
  QKV_CHECK(eos >= -1 && eos < V, "generate", "the end-of-text id must be -1 (none) or a token id in [0, ", V,
            "), got ", eos);
  if (opt.num_beams == 1 && opt.num_return_sequences > 1) {
    QKV_CHECK(opt.sample, "generate", "greedy decoding has one completion per prompt: num_return_sequences > 1 "
              "needs sampling or beam search");
    // n samples of prompt i are n copies of it, each drawing from its own stream (i * n + j).
    std::vector<std::vector<int64_t>> copies;
    for (const auto& p : prompts) copies.insert(copies.end(), size_t(opt.num_return_sequences), p);
    GenerateOptions one = opt;
    one.num_return_sequences = 1;
    return generate_ids(copies, one, size_t(opt.num_return_sequences));
  }

  const size_t n = prompts.size();
  std::vector<Generation> out(n);
  std::vector<Row> rows(n);
  for (size_t i = 0; i < n; ++i) {
    Row& r = rows[i];
    const size_t number = i / copies + 1;  // the prompt's number (from 1), once for its copies
    r.prompt = i;
    r.out = &out[i];
    r.history = prompts[i];
    if (r.history.empty()) {
      QKV_CHECK(bos_ >= 0, "generate", "prompt ", number, " is empty and the model has no bos_token_id "
                "to start from");
      r.history.push_back(bos_);
    }
    for (int64_t t : r.history)
      QKV_CHECK(t >= 0 && t < V, "generate", "prompt ", number, ": token ", t, " outside the vocabulary [0, ", V, ")");
    const int64_t L = int64_t(r.history.size()), room = P - 1;  // at least one new token must fit
    if (L > room) {
      QKV_CHECK(opt.truncate_long, "generate", "prompt ", number, " has ", L, " tokens; the context of ", P,
                " positions leaves room for at most ", room, " prompt tokens plus one new token "
                "(shorten it, or allow truncation from the left)");
      if (!opt.quiet && i % copies == 0)
        std::fprintf(stderr, "qkv generate: warning: prompt %zu (%lld tokens) truncated to its last %lld "
                     "(context %lld)\n", number, (long long)L, (long long)room, (long long)P);
      r.history.erase(r.history.begin(), r.history.end() - room);
      out[i].truncated = true;
    }
    r.prompt_len = int64_t(r.history.size());
    r.max_new = std::min(opt.max_new_tokens, P - r.prompt_len);
    out[i].prompt_tokens = r.prompt_len;
    out[i].prompt_ids = r.history;
    if (bundle_.tokenizer) r.context = text_context(*bundle_.tokenizer, r.history);
    r.rng.set_state(opt.seed, uint64_t(i) << 32);  // stream i: counters from i * 2^32
  }

  // A new token of row r: history, text, stop / eos / length, streaming.
  auto emit = [&](Row& r, int64_t tok) {
    Generation& g = *r.out;
    g.tokens.push_back(tok);
    r.history.push_back(tok);
    bool done = false;
    if (eos >= 0 && tok == eos) {
      g.finish = "eos", done = true;
    } else if (bundle_.tokenizer) {
      g.text = decode_continuation(*bundle_.tokenizer, r.context, g.tokens);
      const size_t at = find_stop(g.text, opt.stop);
      if (at != std::string::npos) g.text.resize(at), g.finish = "stop", done = true;
    }
    if (!done && int64_t(g.tokens.size()) >= r.max_new) g.finish = "length", done = true;
    if (opt.on_token) {
      size_t safe = done ? g.text.size() : std::min(complete_utf8(g.text), stop_hold(g.text, opt.stop));
      safe = std::max(safe, r.emitted);
      // Bytes that are not UTF-8 reach the caller as U+FFFD, as they do in the final text below.
      const std::string piece = utf8::replace_invalid(std::string_view(g.text).substr(r.emitted, safe - r.emitted));
      r.emitted = safe;
      opt.on_token(TokenEvent{r.prompt, tok, piece, done, &g});
    }
    if (done) g.text = utf8::replace_invalid(g.text);
    return done;
  };

  // Longest first: similar lengths share a batch (little padding). Results do not depend on it.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rows[a].prompt_len > rows[b].prompt_len; });

  std::vector<int64_t> suppressed = undecodable_;  // an eos id is never decoded: it may be one of them
  suppressed.erase(std::remove(suppressed.begin(), suppressed.end(), eos), suppressed.end());
  NoGradGuard ng;
  kernels::MatmulPrecisionScope precision(opt.precision);
  if (opt.prompt_logprobs)  // each prompt alone: (1, L, V) logits, L - 1 of them read
    for (Row& r : rows) {
      const int64_t L = r.prompt_len;
      Tensor ids = Tensor::from_vector<int64_t>(r.history, {1, L});
      std::vector<int64_t> positions(static_cast<size_t>(L));
      std::iota(positions.begin(), positions.end(), int64_t(0));
      models::GptCache cache = model.start();
      Tensor lg =  // (1, L, V): position j - 1 predicts token j
          model.step(ids, cache, Tensor::from_vector<int64_t>(positions, {1, L}), Tensor(), false).contiguous();
      detail::suppress_ids(lg, suppressed);
      const float* c = lg.data<float>();
      const int64_t top_n = std::max<int64_t>(opt.logprobs, 0);
      for (int64_t j = 1; j < L; ++j)
        r.out->prompt_logprobs.push_back(decode::token_logprob(c + (j - 1) * V, V, r.history[size_t(j)], top_n));
    }
  if (opt.num_beams > 1) return beam_generations(bundle_, rows, out, eos, opt, suppressed);
  std::vector<float> buf(static_cast<size_t>(V));
  for (size_t start = 0; start < n; start += size_t(opt.batch_size)) {
    std::vector<Row*> batch;  // rows still generating, in batch order
    for (size_t k = start; k < std::min(n, start + size_t(opt.batch_size)); ++k) batch.push_back(&rows[order[k]]);
    std::vector<const std::vector<int64_t>*> histories;
    for (Row* r : batch) histories.push_back(&r->history);
    int64_t B = int64_t(batch.size());
    models::GptCache cache;
    Tensor logits = detail::prefill(model, histories, cache);  // (B, 1, V)
    while (true) {
      detail::suppress_ids(logits, suppressed);
      std::vector<int64_t> keep;  // batch positions of the rows that go on
      for (int64_t b = 0; b < B; ++b) {
        Row& r = *batch[size_t(b)];
        const float* row = logits.data<float>() + b * V;
        std::memcpy(buf.data(), row, size_t(V) * sizeof(float));
        detail::apply_processors(buf.data(), V, r.history, size_t(r.prompt_len), eos, opt);
        int64_t tok;
        if (opt.sample) {
          decode::warp_logits(buf.data(), V, opt.logits);
          tok = decode::sample_token(buf.data(), V, r.rng.uniform1());
        } else {
          tok = decode::argmax_token(buf.data(), V);
        }
        if (opt.logprobs >= 0) r.out->logprobs.push_back(decode::token_logprob(row, V, tok, opt.logprobs));
        if (!emit(r, tok)) keep.push_back(b);
      }
      if (keep.empty()) break;
      if (int64_t(keep.size()) < B) {  // finished rows leave the batch (and the cache)
        std::vector<Row*> next;
        for (int64_t b : keep) next.push_back(batch[size_t(b)]);
        batch = std::move(next);
        cache.select_rows(Tensor::from_vector<int64_t>(keep, {int64_t(keep.size())}));
        B = int64_t(batch.size());
      }
      Tensor step_ids = Tensor::empty({B, 1}, DType::i64), step_pos = Tensor::empty({B, 1}, DType::i64);
      for (int64_t b = 0; b < B; ++b) {
        const Row& r = *batch[size_t(b)];
        step_ids.data<int64_t>()[b] = r.history.back();
        step_pos.data<int64_t>()[b] = int64_t(r.history.size()) - 1;
      }
      logits = model.step(step_ids, cache, step_pos, Tensor(), true);  // (B, 1, V)
    }
  }
  return out;
}

namespace detail {

void suppress_ids(Tensor& logits, const std::vector<int64_t>& ids) {
  if (ids.empty()) return;
  logits = logits.contiguous();
  const int64_t V = logits.size(-1), rows = logits.numel() / V;
  float* p = logits.data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t v : ids) p[r * V + v] = -std::numeric_limits<float>::infinity();
}

void apply_processors(float* row, int64_t V, const std::vector<int64_t>& history, size_t prompt_len, int64_t eos,
                      const GenerateOptions& opt) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  decode::apply_penalties(row, V, history, prompt_len, opt.logits);
  for (int64_t t : decode::repeated_ngram_bans(history, opt.no_repeat_ngram_size)) row[t] = kNegInf;
  if (eos >= 0 && int64_t(history.size() - prompt_len) < opt.min_new_tokens) row[eos] = kNegInf;
}

Tensor prefill(const models::Gpt& model, const std::vector<const std::vector<int64_t>*>& prompts,
               models::GptCache& cache) {
  const int64_t B = int64_t(prompts.size());
  int64_t T = 0;
  for (const auto* p : prompts) T = std::max(T, int64_t(p->size()));
  // ids (B, T), key_pad (B, T) 1 = padding, positions from each row's first token.
  Tensor ids = Tensor::zeros({B, T}, DType::i64), pos = Tensor::zeros({B, T}, DType::i64);
  Tensor pad = Tensor::zeros({B, T}, DType::u8);
  bool any_pad = false;
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<int64_t>& p = *prompts[size_t(b)];
    const int64_t off = T - int64_t(p.size());
    any_pad |= off > 0;
    for (int64_t j = 0; j < T; ++j) {
      pad.data<uint8_t>()[b * T + j] = j < off;
      if (j >= off) ids.data<int64_t>()[b * T + j] = p[size_t(j - off)], pos.data<int64_t>()[b * T + j] = j - off;
    }
  }
  cache = model.start();
  return model.step(ids, cache, pos, any_pad ? pad : Tensor(), /*last_only=*/true);
}

}  // namespace detail

}  // namespace qkv::tasks
