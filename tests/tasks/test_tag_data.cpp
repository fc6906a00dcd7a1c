// Tagged data (tasks/tag_data.h), the tagger's training examples and batches (train/tag_task.h)
// and tasks::Tagger's windows: CoNLL files with errors naming file:line and the field, label
// order, scores (token accuracy, entity F1 through eval/ner.h), first-piece labels with -100
// elsewhere, and a tagger whose answers do not depend on the batch and whose long sentences are
// read back from the right window.
#include <gtest/gtest.h>

#include <filesystem>
#include <algorithm>
#include <random>
#include <sstream>

#include "helpers.h"
#include "qkv/autograd/node.h"
#include "qkv/tasks/tag_data.h"
#include "qkv/tasks/tagger.h"
#include "qkv/train/tag_task.h"
#include "qkv/text/wordpiece.h"
#include "ref.h"

using namespace qkv;
namespace fs = std::filesystem;

// Inside qkv::tasks rather than a using-directive, which would reach the other files of a unity
// batch (tests/CMakeLists.txt).
namespace qkv::tasks {

namespace {

using qkv::testing::error_of;
using Words = std::vector<std::string>;

std::vector<TaggedSentence> conll(const std::string& text) {
  std::istringstream in(text);
  return read_conll(in, "t.conll");
}

}  // namespace

TEST(TagData, ConllSentencesAndTheirLines) {
  const auto s = conll("-DOCSTART-\tO\n\nPierre\tB-PER\nVinken\tI-PER\r\n,\tO\n\n\n\nHe\tO\nsat\tO\n");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].words, (Words{"Pierre", "Vinken", ","}));
  EXPECT_EQ(s[0].tags, (Words{"B-PER", "I-PER", "O"}));
  EXPECT_EQ(s[0].line, 3);
  EXPECT_EQ(s[1].words, (Words{"He", "sat"}));
  EXPECT_EQ(s[1].line, 9);
  EXPECT_EQ(conll_text(s), "Pierre\tB-PER\nVinken\tI-PER\n,\tO\n\nHe\tO\nsat\tO\n\n");
}

TEST(TagData, MalformedLinesNameFileLineAndField) {
  std::string e = error_of([] { conll("a\tO\nb O\n"); });
  EXPECT_NE(e.find("t.conll:2"), std::string::npos) << e;
  EXPECT_NE(e.find("word<TAB>tag"), std::string::npos) << e;
  e = error_of([] { conll("a\tO\tX\n"); });
  EXPECT_NE(e.find("t.conll:1"), std::string::npos) << e;
  e = error_of([] { conll("a\tO\n\nb\t\n"); });
  EXPECT_NE(e.find("t.conll:3"), std::string::npos) << e;
  EXPECT_NE(e.find("field 'tag'"), std::string::npos) << e;
  e = error_of([] { conll("a b\tO\n"); });
  EXPECT_NE(e.find("field 'word'"), std::string::npos) << e;
  e = error_of([] { conll("a\tO\n\xff\tO\n"); });
  EXPECT_NE(e.find("t.conll:2"), std::string::npos) << e;
  e = error_of([] { read_conll_file("/nonexistent/x.conll"); });
  EXPECT_NE(e.find("/nonexistent/x.conll"), std::string::npos) << e;
}

TEST(TagData, WordLinesToTag) {
  std::istringstream in("a b\tc\n\n   \nd\r\n");
  std::vector<int64_t> lines;
  const auto s = read_word_lines(in, "stdin", &lines);
  ASSERT_EQ(s.size(), 4u);  // a blank line is a sentence of no words: answers line up with lines
  EXPECT_EQ(s[0], (Words{"a", "b", "c"}));
  EXPECT_TRUE(s[1].empty() && s[2].empty());
  EXPECT_EQ(s[3], (Words{"d"}));
  EXPECT_EQ(lines, (std::vector<int64_t>{1, 2, 3, 4}));
  std::istringstream none("");
  EXPECT_THROW(read_word_lines(none, "stdin"), qkv::Error);
}

TEST(TagData, TagNamesAndTagSets) {
  const auto s = conll("a\tI-PER\nb\tO\nc\tB-PER\nd\tB-LOC\ne\tI-LOC\n");
  EXPECT_EQ(tag_names(s), (Words{"O", "B-LOC", "I-LOC", "B-PER", "I-PER"}));
  EXPECT_TRUE(is_chunk_tagset(tag_names(s)));
  EXPECT_EQ(tag_names(conll("a\tNN\nb\tDT\nc\t,\n")), (Words{",", "DT", "NN"}));
  EXPECT_FALSE(is_chunk_tagset({",", "DT", "NN"}));
  EXPECT_FALSE(is_chunk_tagset({"O"}));
  EXPECT_FALSE(is_chunk_tagset({"O", "B-X", "NN"}));
}

TEST(TagData, ScoresAreTokenAccuracyAndConllevalEntities) {
  // gold: PER [0,2) LOC [3,4); pred: PER [0,1) (wrong span), LOC [3,4) (right), ORG [4,5) (spurious)
  const std::vector<Words> gold = {{"B-PER", "I-PER", "O", "B-LOC", "O"}};
  const std::vector<Words> pred = {{"B-PER", "O", "O", "B-LOC", "B-ORG"}};
  const TagScores s = score_tags(pred, gold);
  EXPECT_EQ(s.words, 5);
  EXPECT_EQ(s.correct, 3);
  EXPECT_DOUBLE_EQ(s.accuracy, 0.6);
  EXPECT_TRUE(s.chunked);
  EXPECT_EQ(s.n_gold, 2);
  EXPECT_EQ(s.n_pred, 3);
  EXPECT_EQ(s.n_correct, 1);
  EXPECT_DOUBLE_EQ(s.precision, 1.0 / 3);
  EXPECT_DOUBLE_EQ(s.recall, 0.5);
  EXPECT_DOUBLE_EQ(s.f1, 0.4);
  // Gold with no entity, a tagger that finds two: conlleval's 2 found, 0 correct, P = R = F1 = 0
  // (decided from the gold tags alone, the entity scores were left out).
  const TagScores none = score_tags({{"B-LOC", "I-LOC", "B-PER", "O"}}, {{"O", "O", "O", "O"}});
  EXPECT_TRUE(none.chunked);
  EXPECT_EQ(none.n_gold, 0);
  EXPECT_EQ(none.n_pred, 2);
  EXPECT_EQ(none.n_correct, 0);
  EXPECT_DOUBLE_EQ(none.precision, 0.0);
  EXPECT_DOUBLE_EQ(none.f1, 0.0);
  const TagScores pos = score_tags({{"NN", "DT"}}, {{"NN", "NN"}});
  EXPECT_FALSE(pos.chunked);
  EXPECT_DOUBLE_EQ(pos.accuracy, 0.5);
  const std::string e = error_of([] { score_tags({{"O"}}, {{"O", "O"}}); });
  EXPECT_NE(e.find("sentence 1"), std::string::npos) << e;
}

TEST(TagExamples, LabelOnFirstPiecesMinus100ElsewhereAndPaddedBatches) {
  auto tok = std::make_unique<text::WordPieceTokenizer>(
      std::vector<std::string>{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "pierre", "vin", "##ken", ",", "61",
                               "un", "##believ", "##able"},
      text::WordPieceOptions{});
  tok->set_special(text::Role::Pad, "[PAD]");
  tok->set_special(text::Role::Unk, "[UNK]");
  tok->set_special(text::Role::Cls, "[CLS]");
  tok->set_special(text::Role::Sep, "[SEP]");
  const train::TagSpecials sp = train::TagSpecials::of(*tok);
  const Words words = {"Pierre", "Vinken", ",", "61", "unbelievable"};
  const std::vector<int64_t> labels = {1, 2, 0, 0, 3};
  // One window: [CLS] pierre vin ##ken , 61 un ##believ ##able [SEP]
  auto one = train::sentence_tag_examples(*tok, sp, words, labels, 16);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].ids, (std::vector<int64_t>{2, 5, 6, 7, 8, 9, 10, 11, 12, 3}));
  EXPECT_EQ(one[0].labels, (std::vector<int64_t>{-100, 1, 2, -100, 0, 0, 3, -100, -100, -100}));
  // max_len 6 (4 pieces a window, no overlap in training): [0,3) then [3,5)
  int64_t cut = 0;
  auto two = train::sentence_tag_examples(*tok, sp, words, labels, 6, &cut);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].ids, (std::vector<int64_t>{2, 5, 6, 7, 8, 3}));
  EXPECT_EQ(two[0].labels, (std::vector<int64_t>{-100, 1, 2, -100, 0, -100}));
  EXPECT_EQ(two[1].ids, (std::vector<int64_t>{2, 9, 10, 11, 12, 3}));
  EXPECT_EQ(two[1].labels, (std::vector<int64_t>{-100, 0, 3, -100, -100, -100}));
  EXPECT_EQ(cut, 0);
  // max_len 4: "unbelievable" (3 pieces) keeps its first 2.
  auto small = train::sentence_tag_examples(*tok, sp, {"unbelievable"}, {3}, 4, &cut);
  ASSERT_EQ(small.size(), 1u);
  EXPECT_EQ(small[0].ids, (std::vector<int64_t>{2, 10, 11, 3}));
  EXPECT_EQ(cut, 1);

  const train::TagBatch b = train::make_tag_batch({&two[0], &small[0]}, sp.pad);
  EXPECT_EQ(b.ids.shape(), Shape({2, 6}));
  EXPECT_EQ(b.ids.to_vector<int64_t>(), (std::vector<int64_t>{2, 5, 6, 7, 8, 3, 2, 10, 11, 3, 0, 0}));
  EXPECT_EQ(b.labels.to_vector<int64_t>(),
            (std::vector<int64_t>{-100, 1, 2, -100, 0, -100, -100, 3, -100, -100, -100, -100}));
  EXPECT_EQ(b.key_pad.to_vector<uint8_t>(), (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(b.labelled, 4);
  const std::string e = error_of([&] { train::sentence_tag_examples(*tok, sp, words, {1, 2}, 16); });
  EXPECT_NE(e.find("5 words but 2 labels"), std::string::npos) << e;
}

TEST(Tagger, AnswersDoNotDependOnTheBatchAndLongSentencesReadTheirWindow) {
  qkv::testing::RefFile ref("models_bert_tagger");
  const std::string dir =
      (fs::path(qkv::testing::ref_dir()) / ref.params("tagger")["dir"].get<std::string>()).string();
  const Tagger tagger(dir);
  std::mt19937 rng(3);
  std::vector<Words> sentences;
  for (int n : {3, 1, 9, 30, 5, 14, 40}) {  // 30, 40 words: longer than the 14 pieces a window holds
    Words s;
    for (int i = 0; i < n; ++i) s.push_back("w" + std::to_string(rng() % 40));
    sentences.push_back(s);
  }
  TagOptions all;
  all.probabilities = true;
  const auto together = tagger.tag(sentences, all);
  EXPECT_EQ(together[3].windows, 4);  // 30 one-piece words, windows of 14 starting 7 apart: 0, 7, 14, 21
  EXPECT_EQ(together[0].windows, 1);
  TagOptions one = all;
  one.batch_size = 1;
  for (size_t i = 0; i < sentences.size(); ++i) {
    const auto alone = tagger.tag({sentences[i]}, one);
    EXPECT_EQ(alone[0].tag_ids, together[i].tag_ids) << i;
    // The same up to float rounding: BLAS blocks a (1, T) product differently from a (B, T) one.
    ASSERT_EQ(alone[0].probability.size(), together[i].probability.size());
    for (size_t w = 0; w < alone[0].probability.size(); ++w)
      EXPECT_NEAR(alone[0].probability[w], together[i].probability[w], 1e-5 * together[i].probability[w]) << i;
  }
  // Sentence 3's words 10 .. 17 are read from the window of words [7, 21): logits of that window alone.
  const auto& model = *tagger.bundle().model;
  std::vector<int64_t> ids = {2};
  for (int w = 7; w < 21; ++w) ids.push_back(*tagger.bundle().tokenizer->token_to_id(sentences[3][size_t(w)]));
  ids.push_back(3);
  NoGradGuard ng;
  const Tensor logits = model.forward(Tensor::from_vector(ids, {1, int64_t(ids.size())})).contiguous();
  const int64_t C = model.num_labels();
  for (int w = 11; w <= 17; ++w) {  // most context in [7, 21): min(w - 7, 20 - w) beats the neighbours
    const float* row = logits.data<float>() + (1 + (w - 7)) * C;
    EXPECT_EQ(together[3].tag_ids[size_t(w)], std::max_element(row, row + C) - row) << "word " << w;
  }
}

}  // namespace qkv::tasks
