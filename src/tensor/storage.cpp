// Caching allocator: size classes are 64-byte multiples up to 4 KiB, then 8 steps per power of
// two (<= 12.5% waste). One mutex; allocations happen per op, not per element.
#include "qkv/tensor/storage.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "qkv/util/error.h"

namespace qkv {
namespace {

constexpr size_t kAlign = 64;

size_t size_class(size_t n) {
  if (n <= 4096) return ((n + kAlign - 1) / kAlign) * kAlign;
  size_t p = 4096;
  while (p * 2 < n) p *= 2;        // p < n <= 2p
  size_t step = p / 8;
  return ((n + step - 1) / step) * step;
}

struct Cache {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free_lists;
  AllocatorStats stats;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: Storages may outlive static destruction
  return *c;
}

}  // namespace

std::shared_ptr<Storage> Storage::allocate(size_t nbytes) {
  size_t cap = size_class(nbytes == 0 ? 1 : nbytes);
  Cache& c = cache();
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.free_lists.find(cap);
    if (it != c.free_lists.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      c.stats.bytes_cached -= cap;
      c.stats.cache_hits++;
    }
  }
  if (!p) {
    p = std::aligned_alloc(kAlign, cap);
    if (!p) {
      allocator_empty_cache();
      p = std::aligned_alloc(kAlign, cap);
    }
    QKV_CHECK(p != nullptr, "Storage::allocate", "out of memory allocating ", cap, " bytes");
    std::lock_guard<std::mutex> lock(c.mu);
    c.stats.system_allocs++;
  }
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.stats.bytes_in_use += cap;
    if (c.stats.bytes_in_use > c.stats.peak_bytes_in_use) c.stats.peak_bytes_in_use = c.stats.bytes_in_use;
  }
  return std::shared_ptr<Storage>(new Storage(p, nbytes, cap));
}

Storage::~Storage() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.stats.bytes_in_use -= capacity_;
  c.stats.bytes_cached += capacity_;
  c.free_lists[capacity_].push_back(data_);
}

AllocatorStats allocator_stats() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return cache().stats;
}

void allocator_reset_peak() {
  std::lock_guard<std::mutex> lock(cache().mu);
  cache().stats.peak_bytes_in_use = cache().stats.bytes_in_use;
}

void allocator_empty_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (auto& [cap, list] : c.free_lists) {
    for (void* p : list) std::free(p);
    list.clear();
  }
  c.stats.bytes_cached = 0;
}

}  // namespace qkv
