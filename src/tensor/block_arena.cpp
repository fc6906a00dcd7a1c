// Best-fit blocks over segments, coalesced on release (qkv/tensor/block_arena.h).
#include "qkv/tensor/block_arena.h"

#include <algorithm>

#include "qkv/util/error.h"

namespace qkv {
namespace {

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

BlockArena::BlockArena(Source source, Options options) : source_(source), opt_(options) {
  QKV_CHECK(opt_.granule > 0 && (opt_.granule & (opt_.granule - 1)) == 0, "BlockArena", "granule ", opt_.granule,
            " is not a power of two");
  QKV_CHECK(opt_.segment_bytes >= opt_.granule && opt_.min_split >= opt_.granule, "BlockArena",
            "segment_bytes and min_split must be at least the granule");
}

BlockArena::~BlockArena() {
  for (auto& [addr, b] : blocks_) delete b;
  for (const Segment& s : segments_) source_.unmap(reinterpret_cast<void*>(s.base), s.size);
}

void BlockArena::take_free(Block* b) { free_.erase({b->size, b->addr}); }

void BlockArena::put_free(Block* b) {
  b->free = true;
  free_.insert({b->size, b->addr});
}

BlockArena::Block* BlockArena::split(Block* b, size_t size) {
  Block* rest = new Block{b->addr + size, b->size - size, b->segment, b, b->next, true};
  if (b->next) b->next->prev = rest;
  b->next = rest;
  b->size = size;
  blocks_[rest->addr] = rest;
  put_free(rest);
  return rest;
}

BlockArena::Block* BlockArena::merge_into_prev(Block* b) {
  Block* p = b->prev;
  p->size += b->size;
  p->next = b->next;
  if (b->next) b->next->prev = p;
  blocks_.erase(b->addr);
  delete b;
  return p;
}

void* BlockArena::allocate(size_t bytes, size_t* got, bool may_map, bool* mapped) {
  if (mapped) *mapped = false;
  const size_t size = round_up(std::max<size_t>(bytes, 1), opt_.granule);
  Block* b = nullptr;
  auto it = free_.lower_bound({size, 0});
  if (it != free_.end()) {
    b = blocks_.at(it->second);
  } else {
    if (!may_map) return nullptr;
    const size_t seg_bytes = std::max(opt_.segment_bytes, round_up(size, opt_.segment_round));
    void* p = source_.map(seg_bytes);
    if (!p) return nullptr;
    const uintptr_t base = reinterpret_cast<uintptr_t>(p);
    if (base % opt_.granule != 0) {
      source_.unmap(p, seg_bytes);
      fail("BlockArena", "a segment at ", p, " is not aligned to the granule ", opt_.granule);
    }
    segments_.push_back({base, seg_bytes, 0, 0});
    reserved_ += seg_bytes;
    b = new Block{base, seg_bytes, &segments_.back(), nullptr, nullptr, true};
    blocks_[base] = b;
    put_free(b);
    if (mapped) *mapped = true;
  }
  take_free(b);
  b->free = false;
  if (b->size - size >= opt_.min_split) split(b, size);
  b->segment->blocks_in_use++;
  in_use_ += b->size;
  *got = b->size;
  return reinterpret_cast<void*>(b->addr);
}

bool BlockArena::release(void* p) {
  auto it = blocks_.find(reinterpret_cast<uintptr_t>(p));
  if (it == blocks_.end()) return false;
  Block* b = it->second;
  QKV_CHECK(!b->free, "BlockArena::release", "block at ", p, " released twice");
  in_use_ -= b->size;
  Segment* s = b->segment;
  if (--s->blocks_in_use == 0) s->idle_since = ++releases_;
  if (b->next && b->next->free) {
    take_free(b->next);
    merge_into_prev(b->next);
  }
  if (b->prev && b->prev->free) {
    take_free(b->prev);
    b = merge_into_prev(b);
  }
  put_free(b);
  return true;
}

size_t BlockArena::shrink_to(size_t target) {
  size_t unmapped = 0;
  while (reserved_ > target) {
    auto idle = segments_.end();
    for (auto s = segments_.begin(); s != segments_.end(); ++s)
      if (s->blocks_in_use == 0 && (idle == segments_.end() || s->idle_since < idle->idle_since)) idle = s;
    if (idle == segments_.end()) break;
    // A segment with nothing in use is one free block (its blocks merged as they came back).
    Block* b = blocks_.at(idle->base);
    take_free(b);
    blocks_.erase(b->addr);
    delete b;
    source_.unmap(reinterpret_cast<void*>(idle->base), idle->size);
    reserved_ -= idle->size;
    unmapped += idle->size;
    segments_.erase(idle);
  }
  return unmapped;
}

}  // namespace qkv
