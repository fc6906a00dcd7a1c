// Caching allocator. Two paths by size:
//  - large tensors (from 64 KiB: activations, parameters, optimizer state) are blocks of a
//    BlockArena (qkv/tensor/block_arena.h): best fit in segments of 16 MiB or more on 2 MiB pages
//    (qkv/util/buffer.h), coalesced as they come back, so freed memory is reused whatever shape
//    comes next and never sits in glibc's heap;
//  - small ones keep free lists by size class: 64-byte multiples up to 4 KiB, then 8 steps per
//    power of two (<= 12.5% waste). A request takes a free block of its own class, else of the
//    nearest larger class up to eight classes above (at most twice its size from 4 KiB up).
// One mutex; allocations happen per op, not per element.
//
// Bounds, so that shapes that vary from step to step (token-budget batches) cannot grow memory
// without limit: the small lists hold at most as many bytes as small blocks ever had in use at
// once (since the last allocator_empty_cache), the blocks freed longest ago going back first; and
// all tensor memory stays under twice the largest live set of all tensors plus one segment, the
// arena unmapping its idle segments past it.
//
// Measured on the demo's translation training (150 updates, 2 threads, AMD EPYC Zen 4, four
// alternating pairs; BENCHMARKS.md): peak RSS 406 MB against 637 MB when every block came from
// malloc by size class, the same losses to the bit, 41-42 s against 47-55 s (the whole demo's
// training rate: level). Exact-class reuse alone, earlier, had let the cache grow to 1.5 GB.
//
// Under AddressSanitizer the arena is off and every block comes from aligned_alloc, so that
// ASan checks each tensor's bounds; the arena's bookkeeping has tests of its own.
#include "qkv/tensor/storage.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <new>

#include "qkv/tensor/block_arena.h"
#include "qkv/util/buffer.h"
#include "qkv/util/error.h"

namespace qkv {
namespace {

constexpr size_t kAlign = 64;
constexpr int kLargerClassesReused = 8;  // from 4 KiB up, one power of two: at most twice the request
constexpr size_t kArenaMinBytes = size_t(64) << 10;   // from here a tensor is an arena block
constexpr size_t kSegmentBytes = 8 * kHugePageBytes;   // 16 MiB
constexpr bool kArenaOn = !kBufferAsan;

size_t size_class(size_t n) {
  if (n <= 4096) return ((n + kAlign - 1) / kAlign) * kAlign;
  size_t p = 4096;
  while (p * 2 < n) p *= 2;        // p < n <= 2p
  size_t step = p / 8;
  return ((n + step - 1) / step) * step;
}

void* map_segment(size_t bytes) { return buffer_alloc(bytes, BufferLife::kept); }
void unmap_segment(void* p, size_t bytes) { buffer_free(p, bytes, BufferLife::kept); }

struct FreeBlock {
  void* ptr;
  uint64_t freed_at;  // a counter of frees: smaller is older
};

struct Cache {
  std::mutex mu;
  // Granule 4 KiB (blocks start on pages); a remainder under kArenaMinBytes stays with its block,
  // since only requests of that size come here.
  BlockArena arena{{map_segment, unmap_segment}, {kSegmentBytes, kHugePageBytes, 4096, kArenaMinBytes}};
  std::map<size_t, std::deque<FreeBlock>> free_lists;  // small blocks by size class; each list oldest first
  size_t small_cached = 0, small_in_use = 0;
  uint64_t frees = 0;
  // The budgets: the largest live sets, all tensors and small ones. allocator_reset_peak (stats
  // only) leaves them alone.
  size_t max_in_use = 0, small_max_in_use = 0;
  AllocatorStats stats;

  // The newest free small block of class cap, else of the nearest larger class up to
  // kLargerClassesReused classes above. Its capacity in *got. Caller holds mu.
  void* take_small(size_t cap, size_t* got) {
    auto it = free_lists.lower_bound(cap);
    if (it == free_lists.end()) return nullptr;
    if (it->first != cap || it->second.empty()) {  // the larger classes: found only on a miss
      size_t limit = cap;
      for (int i = 0; i < kLargerClassesReused; ++i) limit = size_class(limit + 1);
      while (it != free_lists.end() && it->first <= limit && it->second.empty()) ++it;
      if (it == free_lists.end() || it->first > limit) return nullptr;
    }
    void* p = it->second.back().ptr;
    it->second.pop_back();
    *got = it->first;
    small_cached -= it->first;
    return p;
  }

  // Frees the oldest small blocks until they fit their budget. Caller holds mu.
  void trim_small() {
    while (small_cached > small_max_in_use) {
      auto oldest = free_lists.end();
      for (auto it = free_lists.begin(); it != free_lists.end(); ++it)
        if (!it->second.empty() && (oldest == free_lists.end() ||
                                    it->second.front().freed_at < oldest->second.front().freed_at))
          oldest = it;
      if (oldest == free_lists.end()) return;
      buffer_free(oldest->second.front().ptr, oldest->first, BufferLife::recycled);
      oldest->second.pop_front();
      small_cached -= oldest->first;
    }
  }

  // Unmaps idle segments while tensor memory, with `coming` bytes more, would pass twice the
  // largest live set and a segment. Caller holds mu.
  void trim_arena(size_t coming) {
    const size_t limit = 2 * max_in_use + kSegmentBytes;
    const size_t others = small_in_use + small_cached;
    if (arena.reserved() + others + coming > limit)
      arena.shrink_to(limit > others + coming ? limit - others - coming : 0);
  }

  void refresh_stats() {
    stats.bytes_cached = small_cached + (arena.reserved() - arena.in_use());
  }

  void count_in_use(size_t cap, bool small) {
    stats.bytes_in_use += cap;
    stats.peak_bytes_in_use = std::max(stats.peak_bytes_in_use, stats.bytes_in_use);
    max_in_use = std::max(max_in_use, stats.bytes_in_use);
    if (small) {
      small_in_use += cap;
      small_max_in_use = std::max(small_max_in_use, small_in_use);
    }
  }
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: Storages may outlive static destruction
  return *c;
}

void empty_cache_locked(Cache& c) {
  for (auto& [cap, list] : c.free_lists) {
    for (const FreeBlock& b : list) buffer_free(b.ptr, cap, BufferLife::recycled);
    list.clear();
  }
  c.small_cached = 0;
  c.arena.shrink_to(0);
  c.max_in_use = c.stats.bytes_in_use;  // the budgets restart from what is live now
  c.small_max_in_use = c.small_in_use;
  c.refresh_stats();
}

// An arena block of at least n bytes, its size in *cap; nullptr when the system has no memory.
void* allocate_large(Cache& c, size_t n, size_t* cap) {
  std::lock_guard<std::mutex> lock(c.mu);
  void* p = c.arena.allocate(n, cap, false);
  if (p) {
    c.stats.cache_hits++;
  } else {
    c.max_in_use = std::max(c.max_in_use, c.stats.bytes_in_use + n);  // the budget counts this request
    c.trim_arena(std::max(n, kSegmentBytes));
    bool mapped = false;
    p = c.arena.allocate(n, cap, true, &mapped);
    if (!p) {
      empty_cache_locked(c);
      p = c.arena.allocate(n, cap, true, &mapped);
    }
    if (mapped) c.stats.system_allocs++;
  }
  if (p) c.count_in_use(*cap, false);
  c.refresh_stats();
  return p;
}

void* allocate_small(Cache& c, size_t n, size_t* cap) {
  *cap = size_class(n);
  {
    std::lock_guard<std::mutex> lock(c.mu);
    void* p = c.take_small(*cap, cap);
    if (p) {
      c.stats.cache_hits++;
      c.count_in_use(*cap, true);
      c.refresh_stats();
      return p;
    }
  }
  void* p = buffer_alloc(*cap, BufferLife::recycled);
  std::lock_guard<std::mutex> lock(c.mu);
  if (!p) {
    empty_cache_locked(c);
    p = buffer_alloc(*cap, BufferLife::recycled);
  }
  if (p) {
    c.stats.system_allocs++;
    c.count_in_use(*cap, true);
  }
  c.refresh_stats();
  return p;
}

}  // namespace

std::shared_ptr<Storage> Storage::allocate(size_t nbytes) {
  const size_t n = nbytes == 0 ? 1 : nbytes;
  size_t cap = 0;
  void* p = kArenaOn && n >= kArenaMinBytes ? allocate_large(cache(), n, &cap) : allocate_small(cache(), n, &cap);
  QKV_CHECK(p != nullptr, "Storage::allocate", "out of memory allocating ", n, " bytes");
  return std::shared_ptr<Storage>(new Storage(p, nbytes, cap));
}

std::shared_ptr<Storage> Storage::allocate_apart(size_t nbytes) {
  const size_t n = nbytes == 0 ? 1 : nbytes;
  void* p = buffer_alloc(n, BufferLife::kept);
  QKV_CHECK(p != nullptr, "Storage::allocate_apart", "out of memory allocating ", n, " bytes");
  return std::shared_ptr<Storage>(new Storage(p, nbytes, n, true));
}

std::shared_ptr<Storage> Storage::allocate_zeroed(size_t nbytes) {
  const size_t n = nbytes == 0 ? 1 : nbytes;
  if (!kBufferAsan && n >= buffer_huge_page_threshold(BufferLife::kept))
    return allocate_apart(n);  // a fresh anonymous mapping (buffer_alloc): zero pages, untouched
  std::shared_ptr<Storage> s = allocate(nbytes);
  std::memset(s->data(), 0, n);
  return s;
}

Storage::~Storage() {
  if (apart_) {
    buffer_free(data_, capacity_, BufferLife::kept);
    return;
  }
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.stats.bytes_in_use -= capacity_;
  if (kArenaOn && c.arena.release(data_)) {
    c.trim_arena(0);
  } else {
    c.small_in_use -= capacity_;
    c.small_cached += capacity_;
    c.free_lists[capacity_].push_back({data_, ++c.frees});
    c.trim_small();
  }
  c.refresh_stats();
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
  empty_cache_locked(c);
}

}  // namespace qkv
