// Classification data (tasks/cls_data.h) and the GPT input transformation (train/cls_stream.h):
// labelled files and input lines with errors naming the line, label order, truncation that keeps
// [EXTRACT] (longest first, b on a tie), right-padded batches with their extract positions and
// LM targets.
#include <gtest/gtest.h>

#include <sstream>

#include "helpers.h"
#include "qkv/tasks/cls_data.h"
#include "qkv/text/char_word.h"
#include "qkv/text/finetune_tokens.h"
#include "qkv/train/cls_stream.h"
#include "qkv/util/error.h"

using namespace qkv;

// Inside qkv::tasks rather than a using-directive, which would reach the other files of a unity
// batch (tests/CMakeLists.txt).
namespace qkv::tasks {

namespace {

using qkv::testing::error_of;

// Characters a..z are ids 1..26 ("<unk>" is 0); [START] 27, [DELIM] 28, [EXTRACT] 29.
std::unique_ptr<text::Tokenizer> letters() {
  std::vector<std::string> vocab = {"<unk>"};
  for (char c = 'a'; c <= 'z'; ++c) vocab.push_back(std::string(1, c));
  auto tok = std::make_unique<text::VocabTokenizer>(text::VocabTokenizer::Level::Char, vocab, "<unk>");
  text::add_finetune_tokens(*tok);
  return tok;
}

using Ids = std::vector<int64_t>;

}  // namespace

TEST(ClsData, LabelledLinesAndTheirErrors) {
  std::istringstream single("pos\tgood film\n\nneg\tdull\r\n");
  LabelledSet s = read_labelled(single, "s.tsv");
  EXPECT_FALSE(s.pairs);
  EXPECT_EQ(s.gold, (std::vector<std::string>{"pos", "neg"}));
  EXPECT_EQ(s.inputs[1].a, "dull");
  std::istringstream pairs("yes\ta\tb\nno\tc\td\n");
  LabelledSet p = read_labelled(pairs, "p.tsv");
  EXPECT_TRUE(p.pairs);
  EXPECT_EQ(p.inputs[1].b, "d");
  std::istringstream mixed("yes\ta\tb\n\nno\tc\n");
  EXPECT_NE(error_of([&] { read_labelled(mixed, "m.tsv"); }).find("m.tsv:3"), std::string::npos);
  std::istringstream bad("yes\ta\xff\n");
  EXPECT_NE(error_of([&] { read_labelled(bad, "b.tsv"); }).find("b.tsv:1: not valid UTF-8"), std::string::npos);
  std::istringstream in("one\ntwo\tthree\n");
  EXPECT_NE(error_of([&] { read_cls_inputs(in, "stdin", 0); }).find("stdin:2"), std::string::npos);
  // One input per line, blank lines included (the empty text), so that answers line up with lines.
  std::istringstream blanks("apple\n\r\n   \nmango\n");
  std::vector<int64_t> lines;
  std::vector<ClsInput> got = read_cls_inputs(blanks, "in.txt", 0, &lines);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[1].a, "");
  EXPECT_EQ(got[2].a, "   ");
  EXPECT_EQ(lines, (std::vector<int64_t>{1, 2, 3, 4}));
  std::istringstream blank_pair("a\tb\n\n");
  EXPECT_NE(error_of([&] { read_cls_inputs(blank_pair, "p.txt", 1); }).find("p.txt:2: expected 2 tab-separated fields"),
            std::string::npos);
  std::istringstream none("");
  EXPECT_NE(error_of([&] { read_cls_inputs(none, "stdin", -1); }).find("stdin: no input lines"), std::string::npos);
  // Where the first line decides (-1), a blank one does not: a single-text file keeps its empty
  // texts in place, and a pair file whose first line is blank names that line, not the next.
  std::istringstream lead_blank("\n\napple\n");
  lines.clear();
  got = read_cls_inputs(lead_blank, "in.txt", -1, &lines);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].a, "");
  EXPECT_FALSE(got[0].pair);
  EXPECT_EQ(got[2].a, "apple");
  EXPECT_EQ(lines, (std::vector<int64_t>{1, 2, 3}));
  std::istringstream lead_blank_pairs("\na\tb\nc\td\n");
  EXPECT_NE(error_of([&] { read_cls_inputs(lead_blank_pairs, "p.txt", -1); })
                .find("p.txt:1: expected 2 tab-separated fields"),
            std::string::npos);
  std::istringstream only_blank("\n\n");
  lines.clear();
  got = read_cls_inputs(only_blank, "in.txt", -1, &lines);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(lines, (std::vector<int64_t>{1, 2}));
}

TEST(ClsData, LabelNamesSortNumbersAsNumbers) {
  EXPECT_EQ(label_names({"10", "-1", "2", "2", "0"}), (std::vector<std::string>{"-1", "0", "2", "10"}));
  EXPECT_EQ(label_names({"utils", "admin", "web", "admin"}), (std::vector<std::string>{"admin", "utils", "web"}));
}

TEST(ClsInputs, TemplateAndTruncationKeepExtract) {
  auto tok = letters();
  const train::ClsTokens t = train::ClsTokens::of(*tok);
  EXPECT_EQ(t.start, 27);
  EXPECT_EQ(t.extract, 29);
  bool cut = true;
  EXPECT_EQ(train::encode_cls_input(*tok, t, "abc", nullptr, 16, &cut), (Ids{27, 1, 2, 3, 29}));
  EXPECT_FALSE(cut);
  EXPECT_EQ(train::encode_cls_input(*tok, t, "abcdef", nullptr, 5, &cut), (Ids{27, 1, 2, 3, 29}));
  EXPECT_TRUE(cut);
  std::string_view b = "xyz";
  EXPECT_EQ(train::encode_cls_input(*tok, t, "ab", &b, 16), (Ids{27, 1, 2, 28, 24, 25, 26, 29}));
  std::string_view b2 = "xy";
  EXPECT_EQ(train::encode_cls_input(*tok, t, "abcdef", &b2, 7), (Ids{27, 1, 2, 28, 24, 25, 29}));  // a cut to 2
  EXPECT_EQ(train::encode_cls_input(*tok, t, "abc", &b, 8), (Ids{27, 1, 2, 3, 28, 24, 25, 29}));  // tie: b first
  EXPECT_THROW(train::encode_cls_input(*tok, t, "abc", &b, 4), Error);  // no room for both texts
}

TEST(ClsInputs, RightPaddedBatch) {
  train::ClsExample x{{27, 1, 2, 29}, 1, {}}, y{{27, 5, 29}, 0, {}};
  train::ClsBatch b = train::make_cls_batch({&x, &y});
  EXPECT_EQ(b.ids.to_vector<int64_t>(), (Ids{27, 1, 2, 29, 27, 5, 29, 0}));
  EXPECT_EQ(b.key_pad.to_vector<uint8_t>(), (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(b.extract_pos.to_vector<int64_t>(), (Ids{3, 2}));
  EXPECT_EQ(b.labels.to_vector<int64_t>(), (Ids{1, 0}));
  EXPECT_EQ(b.lm_targets.to_vector<int64_t>(), (Ids{1, 2, 29, 5, 29, -100}));
  train::ClsBatch full = train::make_cls_batch({&x});
  EXPECT_FALSE(full.key_pad.defined());
}

}  // namespace qkv::tasks
