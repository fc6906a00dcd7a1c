// qkv/tensor/storage.h - 64-byte aligned buffers from a caching allocator.
// From 64 KiB a buffer is a block of a BlockArena (qkv/tensor/block_arena.h): best fit in
// segments on 2 MiB pages, merged with its free neighbours when it comes back, so the next step's
// tensors reuse the same pages whatever their shapes. Smaller buffers go back to a per-size-class
// free list and are reused (a request may take a block up to twice its size). A training step that
// allocates the same activations every iteration stops asking the system for memory after the
// first one, and tensor memory stays under twice the largest live set (src/tensor/storage.cpp).
#pragma once
#include <cstddef>
#include <atomic>
#include <cstdint>
#include <memory>

namespace qkv {

class Storage {
 public:
  static std::shared_ptr<Storage> allocate(size_t nbytes);
  // A buffer of its own (buffer_alloc, long-lived: on 2 MiB pages from 2 MiB), outside the cache
  // and its statistics, freed straight back to the system: for memory that lives as long as a
  // model and replaces tensors of the cache (weights held in bf16, nn::hold_in_bf16), so that the
  // segments those leave idle go back to the system whole (allocator_empty_cache).
  static std::shared_ptr<Storage> allocate_apart(size_t nbytes);
  // Zeros, for a tensor that will be filled (a model built to be loaded, nn::init::Scheme::none):
  // from 2 MiB a buffer apart whose pages the system supplies zeroed on first touch, so that it
  // costs no memory until written (a model loaded to be held in bf16 never touches its f32
  // weights); below that, or under AddressSanitizer, allocate() and zero-filled.
  static std::shared_ptr<Storage> allocate_zeroed(size_t nbytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }

  // Counts the in-place writes to this memory that were announced (Tensor::copy_from, fill,
  // mark_modified; the optimizer kernels and nn::init): caches derived from a tensor's values
  // (PackedWeights, ops/packed.h) compare it to know they are stale, and autograd's saved tensors
  // to refuse a backward through values overwritten since (autograd/node.h). Writes through raw
  // data pointers are not seen: such a writer calls Tensor::mark_modified.
  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  void bump_version() { version_.fetch_add(1, std::memory_order_acq_rel); }

 private:
  Storage(void* data, size_t nbytes, size_t capacity, bool apart = false)
      : data_(data), nbytes_(nbytes), capacity_(capacity), apart_(apart) {}
  void* data_;
  size_t nbytes_;
  size_t capacity_;  // the size class actually allocated
  bool apart_;       // allocate_apart's
  std::atomic<uint64_t> version_{0};
};

struct AllocatorStats {
  size_t bytes_in_use = 0;       // held by live Storages (size classes)
  size_t bytes_cached = 0;       // freed, kept for reuse
  size_t peak_bytes_in_use = 0;
  size_t system_allocs = 0;      // calls that reached the system (buffer_alloc)
  size_t cache_hits = 0;
};
AllocatorStats allocator_stats();
void allocator_reset_peak();
void allocator_empty_cache();  // returns every cached block to the system; the cache budget restarts

}  // namespace qkv
