// qkv/tensor/block_arena.h - blocks carved best-fit out of large segments and coalesced when
// given back: the caching allocator's large tensors (qkv/tensor/storage.h).
//
// Why: a training step frees and remakes its activations in shapes that change from step to
// step. Through malloc, blocks of 128 KiB to 32 MiB come from glibc's heap once its dynamic mmap
// threshold has risen, and freed heap memory between live blocks stays resident: the demo's
// translation training peaked at 654 MB for a live set of 296 MB. Here a freed block merges with
// its free neighbours at once, so by the end of a step every segment is one free range again and
// the next step's shapes, whatever they are, fit into the same pages (no fresh zeroed pages).
//
// Bookkeeping only: the arena never reads or writes the memory, so tests can hand it any address
// range. Not thread-safe: the caller locks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <set>
#include <unordered_map>
#include <utility>

namespace qkv {

class BlockArena {
 public:
  struct Source {
    void* (*map)(size_t bytes);             // a new segment of `bytes`, or nullptr
    void (*unmap)(void* p, size_t bytes);   // gives back what map returned
  };
  struct Options {
    size_t segment_bytes;  // the least a new segment holds
    size_t segment_round;  // a larger request's segment: its size rounded up to a multiple of this
    size_t granule;        // block sizes and offsets are multiples of it (a power of two)
    size_t min_split;      // a free remainder smaller than this stays with the block it came from
  };

  BlockArena(Source source, Options options);
  ~BlockArena();  // unmaps every segment
  BlockArena(const BlockArena&) = delete;
  BlockArena& operator=(const BlockArena&) = delete;

  // A block of at least `bytes`, its size in *got: the smallest free block that fits, else (when
  // may_map) one from a new segment, and then *mapped is set. nullptr when nothing fits and
  // may_map is false, or the source has no memory.
  void* allocate(size_t bytes, size_t* got, bool may_map, bool* mapped = nullptr);
  // Takes back a block this arena gave out; false (and nothing changes) if p is not one.
  bool release(void* p);
  // Unmaps wholly free segments, those idle longest first, until reserved() <= target or none
  // is left. Returns the bytes unmapped.
  size_t shrink_to(size_t target);

  size_t reserved() const { return reserved_; }  // bytes in segments
  size_t in_use() const { return in_use_; }      // bytes in blocks given out
  size_t segments() const { return segments_.size(); }
  size_t largest_free_block() const { return free_.empty() ? 0 : free_.rbegin()->first; }

 private:
  struct Segment;
  struct Block {
    uintptr_t addr;
    size_t size;
    Segment* segment;
    Block* prev;  // address neighbours in the same segment
    Block* next;
    bool free;
  };
  struct Segment {
    uintptr_t base;
    size_t size;
    size_t blocks_in_use;
    uint64_t idle_since;  // when blocks_in_use last fell to 0 (a release counter)
  };

  void take_free(Block* b);                // removes b from the free set
  void put_free(Block* b);
  Block* split(Block* b, size_t size);      // b keeps `size`; the rest becomes a free block
  Block* merge_into_prev(Block* b);         // b's free predecessor absorbs b; returns it

  Source source_;
  Options opt_;
  std::list<Segment> segments_;
  std::unordered_map<uintptr_t, Block*> blocks_;   // every block, by address
  std::set<std::pair<size_t, uintptr_t>> free_;    // free blocks by (size, address): best fit
  size_t reserved_ = 0, in_use_ = 0;
  uint64_t releases_ = 0;
};

}  // namespace qkv
