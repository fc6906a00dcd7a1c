// tasks::QuestionAnswerer on the random-weight QA model of tools/refs/models_bert_qa.py: the
// answers do not depend on the batch (padding is masked: batch size 1 and 7 give the same spans
// and scores within f32 rounding), each answer is the context's text at its character offsets,
// contexts longer than the 16-position window are answered from several windows, and its score
// is the best start + end logit over the windows as the model computes them one window at a time.
#include "qkv/tasks/question_answerer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "qkv/autograd/node.h"
#include "qkv/train/qa_task.h"
#include "qkv/util/utf8.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

std::vector<std::pair<std::string, std::string>> inputs() {
  std::mt19937 rng(12);
  auto words = [&](int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += (i ? " " : "") + std::string("w") + std::to_string(rng() % 40);
    return s;
  };
  std::vector<std::pair<std::string, std::string>> out;
  for (int n : {3, 30, 9, 1, 17, 25, 6, 12, 40, 2}) out.push_back({words(1 + int(rng() % 3)), words(n)});
  return out;
}

tasks::QuestionAnswerer answerer(int64_t batch) {
  RefFile ref("models_bert_qa");
  io::BertQaBundle b = io::load_bert_qa((fs::path(ref_dir()) / ref.params("qa")["dir"].get<std::string>()).string());
  tasks::QaOptions o;
  o.window = {16, 3, 4};  // max_len = the model's 16 positions, doc_stride 3, question <= 4 tokens
  o.max_answer_length = 5;
  o.n_best = 4;
  o.batch_size = batch;
  return tasks::QuestionAnswerer(b, o);
}

}  // namespace

TEST(QuestionAnswerer, AnswersDoNotDependOnTheBatch) {
  const auto in = inputs();
  const auto one = answerer(1).answer(in), seven = answerer(7).answer(in);
  ASSERT_EQ(one.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(one[i].size(), seven[i].size());
    ASSERT_FALSE(one[i].empty());
    for (size_t k = 0; k < one[i].size(); ++k) {
      EXPECT_EQ(one[i][k].text, seven[i][k].text);
      EXPECT_EQ(one[i][k].start, seven[i][k].start);
      EXPECT_EQ(one[i][k].end, seven[i][k].end);
      EXPECT_NEAR(one[i][k].score, seven[i][k].score, 1e-5 * std::max(1.0, std::abs(one[i][k].score)));
      const std::u32string ctx = utf8::to_u32_strict(in[i].second, "ctx");
      EXPECT_EQ(utf8::from_u32(ctx.substr(size_t(one[i][k].start), size_t(one[i][k].end - one[i][k].start))),
                one[i][k].text);
      if (k) {
        EXPECT_GE(one[i][k - 1].score, one[i][k].score);
      }
    }
  }
}

TEST(QuestionAnswerer, AWindowTooSmallForTheQuestionIsAnError) {
  tasks::QuestionAnswerer qa = answerer(4);
  qa.options().window.max_query_len = 64;  // a 14-token question leaves no room in 16 positions
  std::string q;
  for (int i = 0; i < 14; ++i) q += "w1 ";
  try {
    qa.answer({{q, "w2 w3"}, {"w1", "w2"}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_len 16 leaves no room"), std::string::npos) << e.what();
  }
}

TEST(QuestionAnswerer, BestScoreIsTheBestSpanOverTheWindowsComputedAlone) {
  const auto in = inputs();
  tasks::QuestionAnswerer qa = answerer(4);
  qa.options().n_best = 1;
  const auto got = qa.answer(in);
  const text::Tokenizer& tok = *qa.bundle().tokenizer;
  NoGradGuard ng;
  for (size_t i = 0; i < in.size(); ++i) {
    SCOPED_TRACE(i);
    const auto ws = text::make_qa_windows(tok, in[i].first, text::tokenize_with_offsets(tok, in[i].second),
                                          qa.options().window);
    if (in[i].second.size() > 60) {
      EXPECT_GT(ws.size(), 1u);  // longer than the window
    }
    double best = -1e30;
    std::string best_text;
    for (const auto& w : ws) {  // brute force over this window's valid spans, the window alone
      const train::QaFeature f = train::qa_feature(w);
      const train::QaBatch b = train::make_qa_batch({&f}, 0, false);
      auto l = qa.bundle().model->forward(b.ids, b.type_ids, b.key_pad);
      const auto s = l.start.to_vector<float>(), e = l.end.to_vector<float>();
      for (size_t a = 0; a < s.size(); ++a)
        for (size_t z = a; z < s.size() && z < a + 5; ++z)
          if (w.ctx_begin[a] >= 0 && w.ctx_begin[z] >= 0 && double(s[a]) + double(e[z]) > best) {
            best = double(s[a]) + double(e[z]);
            best_text = in[i].second.substr(size_t(w.ctx_begin[a]), size_t(w.ctx_end[z] - w.ctx_begin[a]));
          }
    }
    ASSERT_EQ(got[i].size(), 1u);
    EXPECT_NEAR(got[i][0].score, best, 1e-5 * std::max(1.0, std::abs(best)));
    EXPECT_EQ(got[i][0].text, best_text);
  }
}
