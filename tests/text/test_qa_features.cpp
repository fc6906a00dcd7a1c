// QA windows and offsets (text/qa_features.h): every context token maps back to the bytes it came
// from, so the answer text is recovered exactly from offsets (ASCII, accents and CJK, contexts
// longer than the window); run_squad.py's window starts; targets at [CLS] when the answer is not
// wholly inside a window.
#include "qkv/text/qa_features.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <cctype>
#include <fstream>
#include <unistd.h>

#include "qkv/text/wordpiece.h"
#include "qkv/util/error.h"
#include "text_fixtures.h"

using namespace qkv;
using namespace qkv::text;
namespace fs = std::filesystem;

namespace {

// A WordPiece vocabulary that spells any lower-case ASCII word (letters and ## letters), some
// whole words, digits, punctuation and two CJK characters.
std::unique_ptr<WordPieceTokenizer> tokenizer() {
  std::vector<std::string> v = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "homepage", "of", "is",
                                "what", "who", "maintains", "version", "cafe", "中", "文"};
  for (char c = 'a'; c <= 'z'; ++c) v.push_back(std::string(1, c)), v.push_back("##" + std::string(1, c));
  for (char c = '0'; c <= '9'; ++c) v.push_back(std::string(1, c)), v.push_back("##" + std::string(1, c));
  for (const char* p : {".", ",", ":", "/", "-", "?", "<", ">", "@", "(", ")"}) v.push_back(p);
  const fs::path f = fs::path(::testing::TempDir()) / ("qkv_qa_vocab_" + std::to_string(::getpid()) + ".txt");
  {
    std::ofstream o(f);
    for (auto& t : v) o << t << "\n";
  }
  auto tok = WordPieceTokenizer::load_vocab_txt(f.string());
  fs::remove(f);
  return tok;
}

// The context bytes of positions s..e of a window.
std::string span_text(const std::string& ctx, const QaWindow& w, int64_t s, int64_t e) {
  return ctx.substr(size_t(w.ctx_begin[size_t(s)]), size_t(w.ctx_end[size_t(e)] - w.ctx_begin[size_t(s)]));
}

}  // namespace

TEST(QaFeatures, OffsetsSpellTheOriginalText) {
  auto tok = tokenizer();
  const std::string ctx = "Homepage: https://Example.org/x  Café 中文 (v2.1-3)";
  TokenSpans t = tokenize_with_offsets(*tok, ctx);
  // The tokens are those of the whole text.
  EXPECT_EQ(t.ids, tok->encode(ctx));
  std::vector<std::string> pieces;
  for (size_t i = 0; i < t.ids.size(); ++i) pieces.push_back(ctx.substr(size_t(t.begin[i]), size_t(t.end[i] - t.begin[i])));
  // "homepage" is one token; "example" is spelt by letters: each gets its own byte; "Café" loses
  // its accent in the tokenizer ("cafe"), so its one token maps to the whole word, é included.
  EXPECT_EQ(pieces[0], "Homepage");
  EXPECT_EQ(pieces[1], ":");
  EXPECT_EQ(pieces[2], "h");
  EXPECT_EQ(pieces[3], "t");
  const auto cafe = std::find(pieces.begin(), pieces.end(), "Café");
  ASSERT_NE(cafe, pieces.end());
  EXPECT_EQ(tok->id_to_token(t.ids[size_t(cafe - pieces.begin())]), "cafe");
  EXPECT_EQ(*(cafe + 1), "中");
  EXPECT_EQ(*(cafe + 2), "文");
  EXPECT_EQ(pieces.back(), ")");
  for (size_t i = 1; i < t.ids.size(); ++i) EXPECT_LE(t.end[i - 1], t.begin[i]);  // in order, disjoint
}

TEST(QaFeatures, AnswersComeBackExactlyFromOffsetsInEveryWindowThatHoldsThem) {
  auto tok = tokenizer();
  // A context of about 120 tokens, with non-ASCII answers, in windows of 32 tokens.
  std::string ctx;
  for (int i = 0; i < 12; ++i) ctx += "the version of cafe is " + std::to_string(i) + ".5 ; ";
  ctx += "Who maintains Café? Jörg Müller <jm@example.org> does, 中文 too.";
  const std::vector<std::string> answers = {"Jörg Müller", "jm@example.org", "中文", "Café", "version of cafe is 3.5",
                                           "0.5"};
  QaWindowOptions o;
  o.max_len = 32, o.doc_stride = 10, o.max_query_len = 8;
  TokenSpans t = tokenize_with_offsets(*tok, ctx);
  ASSERT_GT(int64_t(t.ids.size()), 3 * o.max_len);
  for (const std::string& a : answers) {
    SCOPED_TRACE(a);
    const size_t at = ctx.find(a);
    ASSERT_NE(at, std::string::npos);
    auto ws = make_qa_windows(*tok, "what is the homepage of the cafe", t, o, int64_t(at), int64_t(at + a.size()));
    ASSERT_GT(ws.size(), 3u);
    int with_answer = 0;
    for (const QaWindow& w : ws) {
      EXPECT_LE(int64_t(w.ids.size()), o.max_len);
      EXPECT_EQ(w.ids.size(), w.type_ids.size());
      if (!w.has_answer) {
        EXPECT_EQ(w.start, 0);
        EXPECT_EQ(w.end, 0);
        continue;
      }
      ++with_answer;
      EXPECT_EQ(span_text(ctx, w, w.start, w.end), a);
      EXPECT_EQ(w.type_ids[size_t(w.start)], 1);
    }
    EXPECT_GE(with_answer, 1);
  }
}

TEST(QaFeatures, WindowStartsFollowRunSquad) {
  auto tok = tokenizer();
  std::string ctx;
  for (int i = 0; i < 25; ++i) ctx += "a ";  // 25 tokens
  TokenSpans t = tokenize_with_offsets(*tok, ctx);
  ASSERT_EQ(t.ids.size(), 25u);
  QaWindowOptions o;
  o.max_len = 14, o.doc_stride = 4, o.max_query_len = 2;  // question "what is the" -> 2 tokens; room 14 - 2 - 3 = 9
  auto ws = make_qa_windows(*tok, "what is the", t, o);
  // starts 0, 4, 8, 12, 16 (16 + 9 = 25 reaches the end)
  ASSERT_EQ(ws.size(), 5u);
  for (size_t i = 0; i < ws.size(); ++i) EXPECT_EQ(ws[i].doc_start, int64_t(4 * i));
  const QaWindow& w = ws[0];
  // [CLS] what is [SEP] a x9 [SEP]
  ASSERT_EQ(w.ids.size(), 14u);
  EXPECT_EQ(w.ids[0], *tok->special_id(Role::Cls));
  EXPECT_EQ(w.ids[3], *tok->special_id(Role::Sep));
  EXPECT_EQ(w.ids[13], *tok->special_id(Role::Sep));
  EXPECT_EQ(w.type_ids, (std::vector<int32_t>{0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(w.ctx_begin[3], -1);
  EXPECT_EQ(w.ctx_begin[4], 0);
  EXPECT_EQ(w.ctx_begin[13], -1);
  // a stride longer than the window never skips tokens: the next window starts after this one
  o.doc_stride = 100;
  auto wide = make_qa_windows(*tok, "what is the", t, o);
  ASSERT_EQ(wide.size(), 3u);
  EXPECT_EQ(wide[1].doc_start, 9);
  EXPECT_EQ(wide[2].doc_start, 18);
  // an answer cut by a window boundary trains that window to [CLS]
  const int64_t b = t.begin[7], e = t.end[10];  // tokens 7..10
  auto cut = make_qa_windows(*tok, "what is the", t, o, b, e);
  EXPECT_TRUE(cut[0].start == 0 && !cut[0].has_answer);
  EXPECT_FALSE(cut[1].has_answer);
  o.max_len = 5;
  EXPECT_THROW(make_qa_windows(*tok, "what is the", t, o), Error);
}

TEST(QaFeatures, CharacterAndByteOffsets) {
  const std::string s = "Jörg 中x";
  EXPECT_EQ(utf8_byte_offset(s, 0, "t"), 0);
  EXPECT_EQ(utf8_byte_offset(s, 2, "t"), 3);   // "Jö" is 3 bytes
  EXPECT_EQ(utf8_byte_offset(s, 6, "t"), 9);   // after "中"
  EXPECT_EQ(utf8_byte_offset(s, 7, "t"), 10);  // the size
  EXPECT_THROW(utf8_byte_offset(s, 8, "t"), Error);
  EXPECT_EQ(utf8_char_offset(s, 9), 6);
  EXPECT_EQ(utf8_char_offset(s, 10), 7);
}

// On the 1 MB test text (prose with Unicode edge cases and invalid bytes) and bert-base-uncased's
// vocab.txt: per line, the tokens with offsets are exactly the tokens of the whole line, in order,
// each mapped to its own letters (lower-cased) or to its whole piece (never across white space).
TEST(QaFeatures, OffsetTokensEqualWholeTextTokensOn1MB) {
  auto bert = WordPieceTokenizer::load_vocab_txt(qkv::testing::npm_cache() + "/bert-base-uncased/vocab.txt");
  const std::string text = qkv::testing::slurp(qkv::testing::test_text_path("bert_1mb.txt", 1100000, false));
  size_t lines = 0, tokens = 0, bad = 0, exact = 0;
  for (size_t p = 0; p < text.size();) {
    size_t nl = text.find('\n', p);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(p, nl - p);
    p = nl + 1;
    if (line.find('[') != std::string::npos) continue;  // "[MASK]" written in the text: encode() splits specials out
    ++lines;
    const TokenSpans t = tokenize_with_offsets(*bert, line);
    if (t.ids != bert->encode(line) && bad++ < 5) ADD_FAILURE() << "line '" << line << "'";
    for (size_t i = 0; i < t.ids.size(); ++i) {
      ++tokens;
      ASSERT_TRUE(t.begin[i] >= 0 && t.begin[i] < t.end[i] && t.end[i] <= int64_t(line.size())) << line;
      if (i) {
        ASSERT_LE(t.begin[i - 1], t.begin[i]) << line;
      }
      std::string tok = bert->id_to_token(t.ids[i]);
      if (tok.rfind("##", 0) == 0) tok.erase(0, 2);
      std::string bytes = line.substr(size_t(t.begin[i]), size_t(t.end[i] - t.begin[i]));
      for (char& c : bytes) c = char(std::tolower((unsigned char)c));
      if (bytes == tok) {
        ++exact;
      } else {  // mapped to its whole piece: one word or character, never across white space
        ASSERT_EQ(bytes.find_first_of(" \t\n\r"), std::string::npos) << line;
      }
    }
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_GT(lines, 1000u);
  EXPECT_GT(tokens, 100000u);
  // The refinement to a token's own bytes happens for most tokens (ASCII words; the text is rich
  // in accents, CJK and symbols, where pieces are mapped whole): 88% here.
  EXPECT_GT(exact, tokens * 8 / 10);
}
