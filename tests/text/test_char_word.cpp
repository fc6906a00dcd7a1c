// Character and word tokenizers: vocabulary order, cut-offs, unknowns; plus UTF-8 decoding and
// the Unicode helpers on hand-checked cases.
#include <gtest/gtest.h>

#include <cstdio>

#include "qkv/text/char_word.h"
#include "qkv/util/unicode.h"
#include "qkv/util/utf8.h"
#include "qkv/util/error.h"

using namespace qkv::text;
namespace utf8 = qkv::utf8;
namespace unicode = qkv::unicode;
using V = std::vector<int32_t>;

TEST(CharWord, WordVocabularyByCountThenBytes) {
  VocabBuildOptions o;  // <pad> <unk> <s> </s>
  auto tok = VocabTokenizer::build_from_text(VocabTokenizer::Level::Word, "b a c a b a\td\ne", o);
  EXPECT_EQ(tok->vocab(), (std::vector<std::string>{"<pad>", "<unk>", "<s>", "</s>", "a", "b", "c", "d", "e"}));
  EXPECT_EQ(tok->encode("a  b zz\te"), (V{4, 5, 1, 8}));
  EXPECT_EQ(tok->decode(V{4, 5, 1, 8}), "a b e");  // <unk> is special: skipped
  o.min_frequency = 2;
  EXPECT_EQ(VocabTokenizer::build_from_text(VocabTokenizer::Level::Word, "b a c a b a", o)->vocab_size(), 6);
  o.min_frequency = 1;
  o.max_size = 5;
  EXPECT_EQ(VocabTokenizer::build_from_text(VocabTokenizer::Level::Word, "b a c a b a", o)->vocab().back(), "a");
  o.unk_token = "[UNK]";
  EXPECT_THROW(VocabTokenizer::build_from_text(VocabTokenizer::Level::Word, "a", o), qkv::Error);
}

TEST(CharWord, CharactersAreCodePoints) {
  VocabBuildOptions o;
  o.special_tokens = {"[PAD]", "[UNK]"};
  o.unk_token = "[UNK]";
  auto tok = VocabTokenizer::build_from_text(VocabTokenizer::Level::Char, "h\xc3\xa9h\xc3\xa9 h", o);
  // h:3, é:2, ' ':1
  EXPECT_EQ(tok->vocab(), (std::vector<std::string>{"[PAD]", "[UNK]", "h", "\xc3\xa9", " "}));
  EXPECT_EQ(tok->encode("\xc3\xa9h!"), (V{3, 2, 1}));
  EXPECT_EQ(tok->decode(V{2, 3, 4, 2}), "h\xc3\xa9 h");
  EXPECT_EQ(tok->require_special_id(Role::Pad), 0);
}

TEST(Utf8, StrictDecoding) {
  auto units = [](std::string_view s) {
    std::vector<uint32_t> out;
    uint32_t cp;
    for (size_t i = 0; i < s.size();) {
      i += utf8::decode(s, i, cp);
      out.push_back(cp);
    }
    return out;
  };
  const uint32_t X = utf8::kInvalid;
  EXPECT_EQ(units("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"), (std::vector<uint32_t>{'a', 0xE9, 0x20AC, 0x1F600}));
  EXPECT_EQ(units("\xc0\xaf"), (std::vector<uint32_t>{X, X}));           // overlong
  EXPECT_EQ(units("\xed\xa0\x80"), (std::vector<uint32_t>{X, X, X}));    // surrogate
  EXPECT_EQ(units("\xf4\x90\x80\x80"), (std::vector<uint32_t>{X, X, X, X}));  // > U+10FFFF
  EXPECT_EQ(units("\xe2\x82" "a"), (std::vector<uint32_t>{X, X, 'a'}));  // truncated
  EXPECT_FALSE(utf8::is_valid("\xff"));
  EXPECT_EQ(utf8::to_u32_dropping_invalid("a\xff" "b"), U"ab");
}

TEST(Unicode, PythonLowerAndNfdSpotChecks) {
  // Values from Python 3.11: 'ΟΔΟΣ ΑΣ.'.lower(), 'İ'.lower(), unicodedata.normalize('NFD', ...).
  EXPECT_EQ(unicode::lower(U"\u039F\u0394\u039F\u03A3"), U"\u03BF\u03B4\u03BF\u03C2");
  EXPECT_EQ(unicode::lower(U"\u03A3\u0391"), U"\u03C3\u03B1");
  EXPECT_EQ(unicode::lower(U"\u0130"), U"i\u0307");
  EXPECT_EQ(unicode::nfd(U"\u00E9"), U"e\u0301");
  EXPECT_EQ(unicode::nfd(U"\uD55C"), U"\u1112\u1161\u11AB");  // 한
  EXPECT_EQ(unicode::nfd(U"\u1E69"), U"s\u0323\u0307");      // ṩ: dot below (220) before dot above (230)
  EXPECT_EQ(unicode::nfd(U"q\u0307\u0323"), U"q\u0323\u0307");  // canonical reordering
  EXPECT_TRUE(unicode::is_letter(0x4E2D));
  EXPECT_TRUE(unicode::is_number(0x0663));
  EXPECT_FALSE(unicode::is_letter(0x0663));
  EXPECT_TRUE(unicode::is_js_space(0xFEFF));
  EXPECT_FALSE(unicode::is_js_space(0x85));
}

// Files: invalid UTF-8 is refused by file and line before counting (the vocabulary holds the
// text's own bytes, which tokenizer.json must hold as UTF-8).
TEST(CharWord, BuildFromFilesRefusesInvalidUtf8ByFileAndLine) {
  const std::string path = ::testing::TempDir() + "/qkv_word_bad_utf8.txt";
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("ok\n\xc3\n", f);  // a lead byte with no continuation on line 2
    std::fclose(f);
  }
  try {
    VocabTokenizer::build(VocabTokenizer::Level::Word, {path}, VocabBuildOptions{});
    ADD_FAILURE() << "invalid UTF-8 was counted";
  } catch (const qkv::Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":2: not valid UTF-8 (byte 1 of the line)"), std::string::npos)
        << e.what();
  }
  std::remove(path.c_str());
  EXPECT_EQ(utf8::check_lines("a\nb\n", "x"), 2u);
}
