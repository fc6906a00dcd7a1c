// qkv/serve/batch_queue.h - a model's request queue and its batching loop: requests that arrive
// together and ask for the same options (their key) are answered by one library call.
//
//   BatchQueue q({.max_batch = 32, .max_wait = 2ms, .max_queue = 256},
//                [&](const std::vector<std::shared_ptr<Job>>& batch) { /* one call, then finish each */ });
//   if (!q.push(job)) ... 429;  job->wait();
//
// The loop takes the oldest job, waits until max_batch inputs with its key are queued or max_wait
// has passed since it arrived, and hands the run function those jobs in arrival order (at most
// max_batch inputs; a job larger than that runs alone). Jobs with other keys wait their turn.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace qkv::serve {

// One request's work, as the batching loop sees it. Concrete jobs add their inputs and results.
class Job {
 public:
  virtual ~Job() = default;
  std::string key;                                  // equal keys may share a call (same options)
  size_t items = 1;                                 // inputs it adds to a batch (texts, prompts)
  std::chrono::steady_clock::time_point arrived{};  // set by push
  std::atomic<bool> cancelled{false};               // the client went away: its answer is not wanted

  // The run function ends every job it was given with one of these (thread-safe, first call wins).
  void finish();
  void fail(int http_status, const std::string& message);
  // Blocks until finish() or fail(); returns false after `timeout` (<= 0: wait forever).
  bool wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  bool done() const;
  int error_status() const;  // 0 when it finished
  std::string error() const;

 protected:
  mutable std::mutex mu_;
  std::condition_variable cv_;  // done, or (streaming jobs) new output
  bool done_ = false;
  int error_status_ = 0;
  std::string error_;
};

struct BatchOptions {
  size_t max_batch = 32;                       // inputs per library call
  std::chrono::microseconds max_wait{2000};    // how long the oldest job waits for company
  size_t max_queue = 256;                      // inputs waiting; a push beyond is refused
};

class BatchQueue {
 public:
  using RunBatch = std::function<void(const std::vector<std::shared_ptr<Job>>&)>;
  BatchQueue(BatchOptions opt, RunBatch run);  // starts the loop thread
  ~BatchQueue();                               // stop()
  BatchQueue(const BatchQueue&) = delete;
  BatchQueue& operator=(const BatchQueue&) = delete;

  // Queues a job; false when it would take the queue past max_queue inputs (an empty queue takes
  // any job) or after stop().
  bool push(std::shared_ptr<Job> job);
  size_t queued_items() const;  // inputs waiting (not those running)
  size_t queued_jobs() const;
  // Runs what is queued, then ends the loop thread. Idempotent.
  void stop();

 private:
  void loop();
  std::vector<std::shared_ptr<Job>> take_batch(std::unique_lock<std::mutex>& lk);

  BatchOptions opt_;
  RunBatch run_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  size_t queued_items_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace qkv::serve
