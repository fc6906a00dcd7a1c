// tasks::Tagger and tasks::QuestionAnswerer at precision bf16 and int8 (`qkv tag` / `qkv answer`
// / `qkv serve` with --precision): built from a directory with a precision, they hold their
// weights so (the encoder's as they are read, the head's after) and give the same bits as the
// directory loaded in f32, held afterwards (nn::Module::hold_weights_in_bf16 / _in_int8, each
// checked against its twin elsewhere) and run at that precision; a call at fp32 is refused, naming
// the held weight; and the answers stay near fp32's, within the bounds stated below.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "qkv/io/bert_qa.h"
#include "qkv/io/bert_tagger.h"
#include "qkv/tasks/question_answerer.h"
#include "qkv/tasks/tagger.h"
#include "int8_held_compare.h"
#include "int8_threshold.h"
#include "precision_compare.h"
#include "ref.h"
#include "scratch_util.h"
#include "tiny_models.h"

using namespace qkv;
using kernels::MatmulPrecision;
using qkv::testing::bit_equal;

namespace {

// tiny_models.h's tagger (labels O/B-X/I-X) and span model, written once.
struct Dirs {
  qkv_test::ScopedTempDir scratch{"tag_answer_precision", "models"};
  std::string tag = scratch.dir + "/tag", qa = scratch.dir + "/qa";
  Dirs() {
    io::save_bert_tagger(tag, qkv_test::tiny_bert_tagger({"O", "B-X", "I-X"}, 51));
    io::save_bert_qa(qa, qkv_test::tiny_bert_qa(52));
  }
};
const Dirs& dirs() {
  static const Dirs d;
  return d;
}

// Two sentences, the second past the model's 16 positions (tagged in windows), and an unknown word.
std::vector<std::vector<std::string>> sentences() {
  std::vector<std::string> longer;
  for (int i = 0; i < 3; ++i)
    for (const char* w : {"cannot", "open", "the", "file", "user", "name", "not", "found"}) longer.push_back(w);
  return {{"save", "the", "file", "zebra"}, longer};
}

std::vector<std::pair<std::string, std::string>> questions() {
  return {{"what cannot open", "the user cannot open the file"},
          {"which name", std::string("print the user name ") + qkv_test::kTinyWords}};  // windows
}

// The two modules hold the same tensors: same dtypes, the same bits (an i8 weight: the same
// values and scales); returns how many are held as `as`.
int64_t expect_same_state(const nn::Module& at_load, const nn::Module& after, DType as) {
  const auto a = at_load.state_dict(), b = after.state_dict();
  EXPECT_EQ(a.size(), b.size());
  int64_t held = 0;
  for (auto& [name, t] : b) {
    if (!a.count(name)) {
      ADD_FAILURE() << name;
      continue;
    }
    EXPECT_EQ(a.at(name).dtype(), t.dtype()) << name;
    if (t.dtype() == DType::i8) qkv::testing::int8_held::expect_same_held(a.at(name), t, name);
    else EXPECT_TRUE(bit_equal(a.at(name), t)) << name;
    held += t.dtype() == as;
  }
  return held;
}

void hold(nn::Module& m, MatmulPrecision p) {
  if (p == MatmulPrecision::bf16) m.hold_weights_in_bf16();
  else m.hold_weights_in_int8();
}

// max over words of |p - fp32's p|, p the probability of the word's tag: the largest of the
// word's softmax, which moves no more than the probabilities do (even where a near tie chose
// another tag).
double max_probability_gap(const std::vector<tasks::Tagging>& a, const std::vector<tasks::Tagging>& f32) {
  double gap = 0;
  for (size_t s = 0; s < f32.size(); ++s)
    for (size_t w = 0; w < f32[s].tags.size(); ++w)
      gap = std::max(gap, std::fabs(a[s].probability[w] - f32[s].probability[w]));
  return gap;
}

void check_tagger(MatmulPrecision p, DType as, double bound) {
  const tasks::Tagger at_load(dirs().tag, p);
  io::BertTaggerBundle b = io::load_bert_tagger(dirs().tag);
  hold(*b.model, p);
  const tasks::Tagger after(std::move(b));
  EXPECT_GT(expect_same_state(*at_load.bundle().model, *after.bundle().model, as), 0) << "no weight held";
  EXPECT_EQ(at_load.bundle().model->classifier->weight.dtype(), as) << "the classifier is held too";

  tasks::TagOptions o;
  o.probabilities = true, o.precision = p, o.batch_size = 2;
  const auto x = at_load.tag(sentences(), o), y = after.tag(sentences(), o);
  ASSERT_EQ(x.size(), y.size());
  EXPECT_GT(x[1].windows, 1);
  for (size_t s = 0; s < x.size(); ++s) {
    EXPECT_EQ(x[s].tag_ids, y[s].tag_ids) << s;
    EXPECT_EQ(x[s].probability, y[s].probability) << s;  // the same doubles
  }
  tasks::TagOptions f32 = o;
  f32.precision = MatmulPrecision::fp32;
  qkv::testing::expect_refused_at_fp32([&] { at_load.tag(sentences(), f32); }, kernels::precision_name(p));
  EXPECT_LT(max_probability_gap(x, tasks::Tagger(dirs().tag).tag(sentences(), f32)), bound);
}

void check_answerer(MatmulPrecision p, DType as, double bound) {
  const tasks::QuestionAnswerer at_load(dirs().qa, p);
  EXPECT_EQ(at_load.options().precision, p);
  io::BertQaBundle b = io::load_bert_qa(dirs().qa);
  hold(*b.model, p);
  tasks::QuestionAnswerer after(std::move(b), at_load.options());
  EXPECT_GT(expect_same_state(*at_load.bundle().model, *after.bundle().model, as), 0) << "no weight held";

  const auto x = at_load.answer(questions()), y = after.answer(questions());
  ASSERT_EQ(x.size(), y.size());
  tasks::QuestionAnswerer f32(dirs().qa);
  const auto want = f32.answer(questions());
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_FALSE(x[i].empty());
    ASSERT_EQ(x[i].size(), y[i].size());
    EXPECT_EQ(x[i][0].text, y[i][0].text) << i;
    EXPECT_EQ(x[i][0].score, y[i][0].score) << i;  // the same double
    // The best span's score is a max over spans: it moves no more than the logits do.
    EXPECT_LT(std::fabs(x[i][0].score - want[i][0].score), bound) << i;
  }
  tasks::QuestionAnswerer refused(io::load_bert_qa(dirs().qa, p), f32.options());  // options at fp32
  qkv::testing::expect_refused_at_fp32([&] { refused.answer(questions()); }, kernels::precision_name(p));
}

}  // namespace

// The bounds are about twice the measured distance from fp32 (AMD Zen 5, AVX512_BF16 and VNNI), on
// these random models whose tag probabilities lie near 1/3 and best span scores near 0.3-0.4:
//   bf16: probability 1.7e-4, score 2.8e-4 (8e-4 of the score, as Bf16Inference.BertHiddenNearFp32);
//   int8 (every weight quantized): probability 7.5e-4, score 1.5e-4.
TEST(TagAnswerPrecision, Bf16TaggerHoldsItsWeightsAndEqualsTheModelHeldAfterLoading) {
  SKIP_WITHOUT_BF16();
  check_tagger(MatmulPrecision::bf16, DType::bf16, 3.5e-4);
}

TEST(TagAnswerPrecision, Bf16AnswererHoldsItsWeightsAndEqualsTheModelHeldAfterLoading) {
  SKIP_WITHOUT_BF16();
  check_answerer(MatmulPrecision::bf16, DType::bf16, 5.5e-4);
}

// int8 with every weight quantized (the default threshold leaves this small model's in f32).
TEST(TagAnswerPrecision, Int8TaggerHoldsItsWeightsAndEqualsTheModelHeldAfterLoading) {
  SKIP_WITHOUT_INT8();
  qkv::testing::Int8Threshold all(0);
  check_tagger(MatmulPrecision::int8, DType::i8, 1.5e-3);
}

TEST(TagAnswerPrecision, Int8AnswererHoldsItsWeightsAndEqualsTheModelHeldAfterLoading) {
  SKIP_WITHOUT_INT8();
  qkv::testing::Int8Threshold all(0);
  check_answerer(MatmulPrecision::int8, DType::i8, 3e-4);
}
