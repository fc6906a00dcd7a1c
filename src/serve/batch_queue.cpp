#include "qkv/serve/batch_queue.h"

#include <exception>

namespace qkv::serve {

void Job::finish() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (done_) return;
    done_ = true;
  }
  cv_.notify_all();
}

void Job::fail(int http_status, const std::string& message) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (done_) return;
    done_ = true;
    error_status_ = http_status;
    error_ = message;
  }
  cv_.notify_all();
}

bool Job::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  if (timeout.count() <= 0) {
    cv_.wait(lk, [&] { return done_; });
    return true;
  }
  return cv_.wait_for(lk, timeout, [&] { return done_; });
}

bool Job::done() const {
  std::lock_guard<std::mutex> lk(mu_);
  return done_;
}

int Job::error_status() const {
  std::lock_guard<std::mutex> lk(mu_);
  return error_status_;
}

std::string Job::error() const {
  std::lock_guard<std::mutex> lk(mu_);
  return error_;
}

BatchQueue::BatchQueue(BatchOptions opt, RunBatch run) : opt_(opt), run_(std::move(run)) {
  if (opt_.max_batch == 0) opt_.max_batch = 1;
  thread_ = std::thread([this] { loop(); });
}

BatchQueue::~BatchQueue() { stop(); }

bool BatchQueue::push(std::shared_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_) return false;
    if (!queue_.empty() && queued_items_ + job->items > opt_.max_queue) return false;
    job->arrived = std::chrono::steady_clock::now();
    queued_items_ += job->items;
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
  return true;
}

size_t BatchQueue::queued_items() const {
  std::lock_guard<std::mutex> lk(mu_);
  return queued_items_;
}

size_t BatchQueue::queued_jobs() const {
  std::lock_guard<std::mutex> lk(mu_);
  return queue_.size();
}

void BatchQueue::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

// Called with the lock held and the queue not empty: waits for company for the oldest job, then
// removes and returns the jobs of its batch.
std::vector<std::shared_ptr<Job>> BatchQueue::take_batch(std::unique_lock<std::mutex>& lk) {
  const std::string key = queue_.front()->key;
  const auto deadline = queue_.front()->arrived + opt_.max_wait;
  auto items_with_key = [&] {
    size_t n = 0;
    for (auto& j : queue_)
      if (j->key == key) n += j->items;
    return n;
  };
  while (!stop_ && items_with_key() < opt_.max_batch && std::chrono::steady_clock::now() < deadline)
    cv_.wait_until(lk, deadline);

  std::vector<std::shared_ptr<Job>> batch;
  size_t items = 0;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if ((*it)->key == key && (batch.empty() || items + (*it)->items <= opt_.max_batch)) {
      items += (*it)->items;
      queued_items_ -= (*it)->items;
      batch.push_back(std::move(*it));
      it = queue_.erase(it);
      if (items >= opt_.max_batch) break;
    } else {
      ++it;
    }
  }
  return batch;
}

void BatchQueue::loop() {
  for (;;) {
    std::vector<std::shared_ptr<Job>> batch;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopped and drained
      batch = take_batch(lk);
    }
    try {
      run_(batch);
    } catch (const std::exception& e) {  // the run function should not throw: answer everyone anyway
      for (auto& j : batch) j->fail(500, e.what());
    } catch (...) {
      for (auto& j : batch) j->fail(500, "unknown error in the batching loop");
    }
    for (auto& j : batch) j->fail(500, "the batch ended without an answer for this request");  // no-op if answered
  }
}

}  // namespace qkv::serve
