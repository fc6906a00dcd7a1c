// qkv/text/qa_features.h - extractive QA inputs (Devlin et al. 2019, 4.2; google-research/bert
// run_squad.py): a context's tokens with the bytes of the context each came from, and the
// windows of
//
//   [CLS] question [SEP] context tokens [doc_start, doc_start + n) [SEP]      type ids 0 ... 0 1 ... 1
//
// A context longer than the window is cut into windows whose starts move by doc_stride tokens
// (run_squad.py: the next window starts min(n, doc_stride) tokens later; the last one ends at the
// context's last token). The question is cut to max_query_len tokens first.
//
// Offsets: the context is split as BERT's BasicTokenizer splits it (white space; each
// punctuation and CJK character alone), each piece is tokenized alone (which gives the tokens of
// the whole text), and a token maps to its piece's bytes. Where the piece's WordPiece tokens spell
// it byte for byte (lower-casing ASCII keeps lengths), each token gets its own bytes; otherwise
// (accents stripped, [UNK], other case mappings) every token of the piece maps to the whole
// piece. So context.substr(begin of a start token, end of an end token - begin) is a span of the
// original text, never a normalised one, and answers that begin and end at piece boundaries
// come back exactly.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "qkv/text/tokenizer.h"

namespace qkv::text {

struct TokenSpans {
  std::vector<int32_t> ids;
  std::vector<int64_t> begin, end;  // per token: its bytes [begin, end) in the text
};
TokenSpans tokenize_with_offsets(const Tokenizer& tok, std::string_view text);

struct QaWindowOptions {
  int64_t max_len = 384;       // tokens per window, specials included
  int64_t doc_stride = 128;    // context tokens between the starts of consecutive windows
  int64_t max_query_len = 64;  // question tokens kept
};

struct QaWindow {
  std::vector<int32_t> ids, type_ids;  // (T)
  std::vector<int64_t> ctx_begin, ctx_end;  // (T): context bytes of each position, -1 outside the context
  int64_t doc_start = 0;  // index of the window's first context token among the context's tokens
  int64_t start = 0, end = 0;  // training targets: the answer's first and last position, 0 ([CLS]) if
                               // the answer is not wholly inside this window
  bool has_answer = false;
};

// The windows of one (question, context). answer_begin/answer_end: the answer's bytes in the
// context ([begin, end), -1 for none: every target is 0); its tokens are those whose bytes
// overlap it. Needs the tokenizer's [CLS] and [SEP]; a window too small for one context token
// is an error naming max_len.
std::vector<QaWindow> make_qa_windows(const Tokenizer& tok, std::string_view question, const TokenSpans& context,
                                      const QaWindowOptions& opt, int64_t answer_begin = -1, int64_t answer_end = -1);

// UTF-8 offsets: the byte offset of code point `chars` (chars == number of code points: the
// size), and the number of code points before byte `bytes` (which must be a character boundary).
// Errors name `where`.
int64_t utf8_byte_offset(std::string_view s, int64_t chars, const std::string& where);
int64_t utf8_char_offset(std::string_view s, int64_t bytes);

}  // namespace qkv::text
