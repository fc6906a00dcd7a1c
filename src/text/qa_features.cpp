// Extractive QA windows and token offsets (qkv/text/qa_features.h).
#include "qkv/text/qa_features.h"

#include <algorithm>

#include "qkv/text/wordpiece.h"
#include "qkv/util/error.h"
#include "qkv/util/unicode.h"
#include "qkv/util/utf8.h"

namespace qkv::text {

namespace {

// BERT's _is_whitespace: space, \t, \n, \r and the Zs category.
bool is_bert_space(uint32_t cp) {
  return cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' || unicode::is_space_separator(cp);
}

char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; }

// The tokens of one piece (a word, a punctuation or CJK character), each mapped to its own bytes
// when they spell the piece (ASCII lower-casing aside), else to the whole piece.
void add_piece(const Tokenizer& tok, std::string_view text, int64_t b, int64_t e, TokenSpans& out) {
  const std::string_view piece = text.substr(size_t(b), size_t(e - b));
  std::vector<int32_t> ids;
  tok.encode_model(piece, ids);
  std::vector<std::string> spelt(ids.size());
  int64_t total = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    spelt[i] = tok.model_id_to_token(ids[i]);
    if (i > 0 && spelt[i].rfind("##", 0) == 0) spelt[i].erase(0, 2);
    total += int64_t(spelt[i].size());
  }
  bool exact = total == e - b;
  for (size_t i = 0, at = 0; exact && i < ids.size(); ++i)
    for (char c : spelt[i]) exact = exact && ascii_lower(piece[at++]) == ascii_lower(c);
  int64_t at = b;
  for (size_t i = 0; i < ids.size(); ++i) {
    out.ids.push_back(ids[i]);
    out.begin.push_back(exact ? at : b);
    at += int64_t(spelt[i].size());
    out.end.push_back(exact ? at : e);
  }
}

}  // namespace

TokenSpans tokenize_with_offsets(const Tokenizer& tok, std::string_view text) {
  TokenSpans out;
  int64_t word = -1;  // start of the current word, -1 between words
  size_t i = 0;
  while (i < text.size()) {
    uint32_t cp = 0;
    const size_t len = size_t(utf8::decode(text, i, cp));
    const bool valid = cp != utf8::kInvalid;  // an invalid byte stays inside a word (the tokenizer drops it)
    const bool alone = valid && (bert_is_punctuation(cp) || bert_is_chinese_char(cp));
    if ((valid && is_bert_space(cp)) || alone) {
      if (word >= 0) add_piece(tok, text, word, int64_t(i), out);
      word = -1;
      if (alone) add_piece(tok, text, int64_t(i), int64_t(i + len), out);
    } else if (word < 0) {
      word = int64_t(i);
    }
    i += len;
  }
  if (word >= 0) add_piece(tok, text, word, int64_t(text.size()), out);
  return out;
}

std::vector<QaWindow> make_qa_windows(const Tokenizer& tok, std::string_view question, const TokenSpans& ctx,
                                      const QaWindowOptions& opt, int64_t answer_begin, int64_t answer_end) {
  const int32_t cls = tok.require_special_id(Role::Cls), sep = tok.require_special_id(Role::Sep);
  QKV_CHECK(opt.doc_stride >= 1, "QA windows", "doc_stride must be >= 1, got ", opt.doc_stride);
  std::vector<int32_t> q = tok.encode(question);
  if (int64_t(q.size()) > opt.max_query_len) q.resize(size_t(std::max<int64_t>(opt.max_query_len, 0)));
  const int64_t room = opt.max_len - int64_t(q.size()) - 3;  // context tokens per window
  QKV_CHECK(room >= 1, "QA windows", "max_len ", opt.max_len, " leaves no room for the context after a question of ",
            q.size(), " tokens (at most max_query_len ", opt.max_query_len, ") and [CLS] [SEP] [SEP]: shorten the "
            "question, or keep fewer of its tokens (max_query_len: qkv answer --max-query-len, or a QA run's "
            "data.max_query_len)");
  // The answer's tokens: the first and last whose bytes overlap it.
  int64_t tok_start = -1, tok_end = -1;
  const int64_t N = int64_t(ctx.ids.size());
  if (answer_begin >= 0 && answer_end > answer_begin)
    for (int64_t t = 0; t < N; ++t)
      if (ctx.begin[size_t(t)] < answer_end && ctx.end[size_t(t)] > answer_begin) {
        if (tok_start < 0) tok_start = t;
        tok_end = t;
      }
  std::vector<QaWindow> out;
  for (int64_t doc = 0;;) {
    const int64_t n = std::min(N - doc, room);
    QaWindow w;
    w.doc_start = doc;
    w.ids.push_back(cls);
    w.ids.insert(w.ids.end(), q.begin(), q.end());
    w.ids.push_back(sep);
    w.type_ids.assign(w.ids.size(), 0);
    w.ctx_begin.assign(w.ids.size(), -1);
    w.ctx_end.assign(w.ids.size(), -1);
    const int64_t first = int64_t(w.ids.size());
    for (int64_t t = doc; t < doc + n; ++t) {
      w.ids.push_back(ctx.ids[size_t(t)]);
      w.type_ids.push_back(1);
      w.ctx_begin.push_back(ctx.begin[size_t(t)]);
      w.ctx_end.push_back(ctx.end[size_t(t)]);
    }
    w.ids.push_back(sep);
    w.type_ids.push_back(1);
    w.ctx_begin.push_back(-1);
    w.ctx_end.push_back(-1);
    if (tok_start >= doc && tok_end < doc + n) {  // wholly inside: else both targets stay [CLS]
      w.has_answer = true;
      w.start = first + tok_start - doc;
      w.end = first + tok_end - doc;
    }
    out.push_back(std::move(w));
    if (doc + n >= N) break;
    doc += std::min(n, opt.doc_stride);
  }
  return out;
}

int64_t utf8_byte_offset(std::string_view s, int64_t chars, const std::string& where) {
  QKV_CHECK(chars >= 0, where, "a character offset must be >= 0, got ", chars);
  size_t i = 0;
  for (int64_t c = 0; c < chars; ++c) {
    QKV_CHECK(i < s.size(), where, "character offset ", chars, " is past the end of a text of ", c, " characters");
    uint32_t cp = 0;
    i += size_t(utf8::decode(s, i, cp));
  }
  return int64_t(i);
}

int64_t utf8_char_offset(std::string_view s, int64_t bytes) {
  int64_t c = 0;
  for (size_t i = 0; i < size_t(bytes) && i < s.size(); ++c) {
    uint32_t cp = 0;
    i += size_t(utf8::decode(s, i, cp));
  }
  return c;
}

}  // namespace qkv::text
