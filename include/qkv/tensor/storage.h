// qkv/tensor/storage.h - 64-byte aligned buffers from a caching allocator.
// Freed blocks go back to a per-size-class free list and are reused, so a training step that
// allocates the same activations every iteration stops calling malloc after the first one.
#pragma once
#include <cstddef>
#include <memory>

namespace qkv {

class Storage {
 public:
  static std::shared_ptr<Storage> allocate(size_t nbytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }

 private:
  Storage(void* data, size_t nbytes, size_t capacity) : data_(data), nbytes_(nbytes), capacity_(capacity) {}
  void* data_;
  size_t nbytes_;
  size_t capacity_;  // the size class actually allocated
};

struct AllocatorStats {
  size_t bytes_in_use = 0;       // held by live Storages (size classes)
  size_t bytes_cached = 0;       // freed, kept for reuse
  size_t peak_bytes_in_use = 0;
  size_t system_allocs = 0;      // calls that reached aligned_alloc
  size_t cache_hits = 0;
};
AllocatorStats allocator_stats();
void allocator_reset_peak();
void allocator_empty_cache();  // returns every cached block to the system

}  // namespace qkv
