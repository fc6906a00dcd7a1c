// serve::BatchQueue: jobs with one key that arrive within max_wait are run in one call, in
// arrival order, at most max_batch inputs per call (a larger job alone); other keys wait for
// their own call; a push past max_queue is refused; stop() runs what is queued.
#include <gtest/gtest.h>

#include <mutex>

#include "qkv/serve/batch_queue.h"

using namespace qkv::serve;
using namespace std::chrono_literals;

namespace {

struct TestJob : Job {
  int id = 0;
};

std::shared_ptr<TestJob> job(int id, const std::string& key, size_t items = 1) {
  auto j = std::make_shared<TestJob>();
  j->id = id, j->key = key, j->items = items;
  return j;
}

// Records each call's job ids; the first call can be held until release() (to fill the queue).
struct Recorder {
  std::mutex mu;
  std::vector<std::vector<int>> calls;
  void operator()(const std::vector<std::shared_ptr<Job>>& batch) {
    std::vector<int> ids;
    for (auto& j : batch) ids.push_back(static_cast<TestJob&>(*j).id);
    {
      std::lock_guard<std::mutex> lk(mu);
      calls.push_back(ids);
    }
    for (auto& j : batch) j->finish();
  }
};

}  // namespace

TEST(BatchQueue, JobsArrivingTogetherShareACallInOrderUpToMaxBatch) {
  Recorder rec;
  BatchQueue q({.max_batch = 4, .max_wait = 200ms, .max_queue = 100}, [&](auto& b) { rec(b); });
  std::vector<std::shared_ptr<TestJob>> jobs;
  for (int i = 0; i < 6; ++i) jobs.push_back(job(i, "k"));
  for (auto& j : jobs) ASSERT_TRUE(q.push(j));
  for (auto& j : jobs) ASSERT_TRUE(j->wait(5000ms));
  ASSERT_EQ(rec.calls.size(), 2u);
  EXPECT_EQ(rec.calls[0], (std::vector<int>{0, 1, 2, 3}));  // a full batch goes at once
  EXPECT_EQ(rec.calls[1], (std::vector<int>{4, 5}));        // the rest after max_wait
  for (auto& j : jobs) EXPECT_EQ(j->error_status(), 0);
}

TEST(BatchQueue, KeysAreNotMixedAndALargeJobRunsAlone) {
  Recorder rec;
  BatchQueue q({.max_batch = 4, .max_wait = 100ms, .max_queue = 100}, [&](auto& b) { rec(b); });
  auto a = job(1, "greedy"), b = job(2, "beam"), c = job(3, "greedy"), d = job(4, "greedy", 9);
  for (auto& j : {a, b, c, d}) ASSERT_TRUE(q.push(j));
  for (auto& j : {a, b, c, d}) ASSERT_TRUE(j->wait(5000ms));
  ASSERT_EQ(rec.calls.size(), 3u);
  EXPECT_EQ(rec.calls[0], (std::vector<int>{1, 3}));  // d would take the call past 4 inputs
  EXPECT_EQ(rec.calls[1], (std::vector<int>{2}));
  EXPECT_EQ(rec.calls[2], (std::vector<int>{4}));
}

TEST(BatchQueue, APushPastMaxQueueIsRefusedAndStopRunsWhatIsQueued) {
  Recorder rec;
  auto q = std::make_unique<BatchQueue>(BatchOptions{.max_batch = 8, .max_wait = 10s, .max_queue = 3},
                                        [&](auto& b) { rec(b); });
  auto a = job(1, "k", 2), b = job(2, "k", 1), c = job(3, "k", 1);
  ASSERT_TRUE(q->push(a));
  ASSERT_TRUE(q->push(b));
  EXPECT_FALSE(q->push(c));  // 2 + 1 + 1 > 3
  EXPECT_EQ(q->queued_items(), 3u);
  EXPECT_EQ(q->queued_jobs(), 2u);
  const auto t0 = std::chrono::steady_clock::now();
  q->stop();  // does not wait out the 10 s
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_TRUE(a->done() && b->done());
  ASSERT_EQ(rec.calls.size(), 1u);
  EXPECT_EQ(rec.calls[0], (std::vector<int>{1, 2}));
  EXPECT_FALSE(q->push(job(4, "k")));  // stopped
}

TEST(BatchQueue, AJobTheRunFunctionLeftUnansweredFailsAndAThrowFailsItsBatch) {
  BatchQueue q({.max_batch = 1, .max_wait = 0ms, .max_queue = 10}, [](const std::vector<std::shared_ptr<Job>>& b) {
    if (static_cast<TestJob&>(*b[0]).id == 2) throw std::runtime_error("boom");
  });
  auto a = job(1, "k"), b = job(2, "k");
  ASSERT_TRUE(q.push(a));
  ASSERT_TRUE(q.push(b));
  ASSERT_TRUE(a->wait(5000ms) && b->wait(5000ms));
  EXPECT_EQ(a->error_status(), 500);
  EXPECT_NE(a->error().find("without an answer"), std::string::npos);
  EXPECT_EQ(b->error_status(), 500);
  EXPECT_EQ(b->error(), "boom");
}
