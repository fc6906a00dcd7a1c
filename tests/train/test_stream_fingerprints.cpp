// A resumed classifier or QA run refuses a corpus that changed under it: their streams' batch-plan
// fingerprints cover every token (and segment id), as the translation and tagging streams' do.
// They hashed lengths and labels (or answer positions) alone, so a run resumed on text edited in
// place went on training on the new text.
#include <gtest/gtest.h>

#include "qkv/train/cls_stream.h"
#include "qkv/train/qa_task.h"
#include "qkv/util/error.h"

using namespace qkv;
using namespace qkv::train;

namespace {

std::vector<ClsExample> cls_examples() {
  std::vector<ClsExample> ex;
  for (int64_t i = 0; i < 40; ++i) {
    ClsExample e;
    for (int64_t k = 0; k < 3 + i % 5; ++k) e.ids.push_back(5 + (i * 7 + k) % 23), e.types.push_back(k > 2);
    e.label = i % 3;
    ex.push_back(e);
  }
  return ex;
}

std::vector<QaFeature> qa_features() {
  std::vector<QaFeature> f;
  for (int32_t i = 0; i < 40; ++i) {
    QaFeature q;
    for (int32_t k = 0; k < 6 + i % 4; ++k) q.ids.push_back(5 + (i * 3 + k) % 19), q.type_ids.push_back(k > 3);
    q.start = 4, q.end = 5;
    f.push_back(q);
  }
  return f;
}

}  // namespace

TEST(StreamFingerprints, AClassifierStreamRefusesAnotherTokenOrSegment) {
  const ClsExampleStream a(cls_examples(), 8, 3);
  const auto pos = a.position();
  ClsExampleStream same(cls_examples(), 8, 3);
  EXPECT_NO_THROW(same.restore(pos));
  auto token = cls_examples();
  token[11].ids[1] += 1;  // the same length and label
  ClsExampleStream edited(token, 8, 3);
  EXPECT_THROW(edited.restore(pos), Error);
  auto segment = cls_examples();
  segment[11].types[0] = 1;
  ClsExampleStream resegmented(segment, 8, 3);
  EXPECT_THROW(resegmented.restore(pos), Error);
}

TEST(StreamFingerprints, AQaStreamRefusesAnotherToken) {
  const QaFeatureStream a(qa_features(), 8, 0, 3);
  const auto pos = a.position();
  QaFeatureStream same(qa_features(), 8, 0, 3);
  EXPECT_NO_THROW(same.restore(pos));
  auto token = qa_features();
  token[23].ids[2] += 1;  // the same length and answer
  QaFeatureStream edited(token, 8, 0, 3);
  EXPECT_THROW(edited.restore(pos), Error);
}
