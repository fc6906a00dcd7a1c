#include "qkv/tasks/translator.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "qkv/models/transformer.h"
#include "qkv/text/placeholders.h"
#include "qkv/text/tokenizer.h"

namespace qkv::tasks {

train::SeqIds special_ids(const io::Seq2SeqBundle& b) {
  const auto& m = b.config.at("model");
  return {m.value("pad_id", int64_t(0)), m.value("bos_id", int64_t(1)), m.value("eos_id", int64_t(2))};
}

Translator::Translator(const std::string& model_dir, kernels::MatmulPrecision precision)
    : Translator(io::load_seq2seq(model_dir, precision)) {
  bundle_.model->eval();
}

Translator::Translator(io::Seq2SeqBundle bundle) : bundle_(std::move(bundle)) {
  QKV_CHECK(bundle_.model != nullptr, "Translator", "needs a model");
  ids_ = tasks::special_ids(bundle_);  // the free function (the member of that name hides it)
  if (bundle_.tgt_tok) unk_ = bundle_.tgt_tok->special_id(text::Role::Unk).value_or(-1);
}

void Translator::hold_weights_in_bf16() {
  if (auto* t = dynamic_cast<models::Transformer*>(bundle_.model.get())) t->hold_weights_in_bf16();
}

void Translator::hold_weights_in_int8() {
  if (auto* t = dynamic_cast<models::Transformer*>(bundle_.model.get())) t->hold_weights_in_int8_blocked();
}

void Translator::check_tokenizers(const char* who) const {
  QKV_CHECK(bundle_.src_tok && bundle_.tgt_tok, who, "the model was loaded without its tokenizers");
}

std::string Translator::detokenize(const std::vector<int64_t>& tokens) const {
  check_tokenizers("Translator::detokenize");
  std::vector<int32_t> toks;
  for (int64_t t : tokens)
    if (t != ids_.eos) toks.push_back(int32_t(t));
  return bundle_.tgt_tok->decode(toks);
}

std::vector<int64_t> Translator::encode_source(std::string_view line, int64_t max_len, bool* cut,
                                               std::vector<std::string>* originals) const {
  text::Protected p;
  if (bundle_.protect_spans) {
    p = text::protect(line);
    line = p.text;
    if (originals) *originals = std::move(p.originals);
  }
  return train::encode_sentence(*bundle_.src_tok, line, ids_.eos, max_len, cut);
}

bool Translator::source_too_long(std::string_view line) const {
  check_tokenizers("Translator::source_too_long");
  bool cut = false;
  encode_source(line, bundle_.model->max_len(), &cut, nullptr);
  return cut;
}

std::string Translator::restore_spans(std::string target_text, std::string_view source) const {
  return bundle_.protect_spans ? text::restore(target_text, text::protect(source).originals) : target_text;
}

std::vector<int64_t> Translator::source_ids(std::string_view line) const {
  check_tokenizers("Translator::source_ids");
  return encode_source(line, 0, nullptr, nullptr);
}

Translations Translator::translate(const std::vector<std::string>& lines, const TranslateOptions& opt) const {
  check_tokenizers("translate");
  const models::Seq2Seq& model = *bundle_.model;
  Translations r;
  const int64_t n = int64_t(lines.size());
  r.src_ids.resize(size_t(n));
  r.text.resize(size_t(n));
  r.hyps.resize(size_t(n));
  // A model trained with protected spans sees its input the same way: originals[i] goes back into
  // line i's translation.
  std::vector<std::vector<std::string>> originals(bundle_.protect_spans ? size_t(n) : 0);
  for (int64_t i = 0; i < n; ++i) {
    bool cut = false;
    r.src_ids[size_t(i)] = encode_source(lines[size_t(i)], model.max_len(), &cut,
                                         bundle_.protect_spans ? &originals[size_t(i)] : nullptr);
    if (!cut) continue;
    QKV_CHECK(!opt.refuse_long, "translate", "line ", i + 1, " has more than ", model.max_len() - 1,
              " source tokens (the model's maximum); shorten it or allow truncation");
    ++r.truncated;
    if (!opt.quiet)
      std::fprintf(stderr, "qkv translate: warning: line %lld truncated to %lld tokens (model maximum)\n",
                   (long long)(i + 1), (long long)(model.max_len() - 1));
  }
  r.hyps = translate_ids(r.src_ids, opt);
  r.hyp_text.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    for (const decode::Hypothesis& h : r.hyps[size_t(i)]) {
      std::string t = detokenize(h.tokens);
      r.hyp_text[size_t(i)].push_back(bundle_.protect_spans ? text::restore(t, originals[size_t(i)]) : std::move(t));
    }
    r.text[size_t(i)] = r.hyp_text[size_t(i)].front();
  }
  return r;
}

std::vector<std::vector<decode::Hypothesis>> Translator::translate_ids(const std::vector<std::vector<int64_t>>& src_ids,
                                                                       const TranslateOptions& opt) const {
  QKV_CHECK(opt.batch_size >= 1, "translate", "batch size must be >= 1, got ", opt.batch_size);
  kernels::check_task_precision(opt.precision, "translate");
  kernels::MatmulPrecisionScope precision(opt.precision);
  models::Seq2Seq& model = *bundle_.model;
  const int64_t n = int64_t(src_ids.size());
  std::vector<std::vector<decode::Hypothesis>> hyps(static_cast<size_t>(n));
  // Longest first: similar lengths share a batch (little padding), and the slowest run early.
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) {
    return src_ids[size_t(a)].size() > src_ids[size_t(c)].size();
  });
  const decode::SpecialIds ids{ids_.bos, opt.ignore_eos ? -1 : ids_.eos, ids_.pad, unk_};  // eos -1: nothing ends one
  for (int64_t start = 0; start < n; start += opt.batch_size) {
    const int64_t end = std::min(n, start + opt.batch_size);
    std::vector<const std::vector<int64_t>*> rows;
    for (int64_t k = start; k < end; ++k) rows.push_back(&src_ids[size_t(order[size_t(k)])]);
    Tensor src, pad;  // (B, S) i64, (B, S) u8
    train::make_source_batch(rows, ids_.pad, src, pad);
    decode::Options search = opt.search;
    if (search.sample)  // each sentence samples from the stream of its index in the input
      for (int64_t k = start; k < end; ++k) search.streams.push_back(uint64_t(order[size_t(k)]));
    auto out = decode::translate(model, src, pad, ids, search);
    for (int64_t k = start; k < end; ++k) hyps[size_t(order[size_t(k)])] = std::move(out[size_t(k - start)]);
  }
  return hyps;
}

}  // namespace qkv::tasks
