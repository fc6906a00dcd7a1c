// BlockArena: best fit, splitting, coalescing and giving segments back, on fake address ranges
// (the arena never touches its memory), against a brute-force model for random traffic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "qkv/tensor/block_arena.h"
#include "qkv/util/error.h"

using namespace qkv;

namespace {

constexpr size_t kUnit = 4096;

// Segments are fake: far-apart addresses, recorded so that tests can check what was mapped.
struct FakeSource {
  static inline uintptr_t next = uintptr_t(1) << 40;
  static inline std::map<uintptr_t, size_t> mapped;  // live segments
  static inline bool fail = false;
  static void* map(size_t bytes) {
    if (fail) return nullptr;
    const uintptr_t p = next;
    next += (uintptr_t(1) << 32);
    mapped[p] = bytes;
    return reinterpret_cast<void*>(p);
  }
  static void unmap(void* p, size_t bytes) {
    auto it = mapped.find(reinterpret_cast<uintptr_t>(p));
    ASSERT_NE(it, mapped.end()) << "unmapped a segment that was never mapped";
    EXPECT_EQ(it->second, bytes);
    mapped.erase(it);
  }
};

class BlockArenaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeSource::mapped.clear();
    FakeSource::fail = false;
  }
  // Segments of 16 units, rounded to 4 units when larger; remainders under 2 units stay.
  static BlockArena::Options options() { return {16 * kUnit, 4 * kUnit, kUnit, 2 * kUnit}; }
  static BlockArena::Source source() { return {FakeSource::map, FakeSource::unmap}; }
  static uintptr_t addr(void* p) { return reinterpret_cast<uintptr_t>(p); }
};

TEST_F(BlockArenaTest, SplitsASegmentIntoConsecutiveBlocks) {
  BlockArena a(source(), options());
  size_t got = 0;
  bool mapped = false;
  void* p = a.allocate(3 * kUnit - 100, &got, true, &mapped);  // rounded up to the granule
  EXPECT_TRUE(mapped);
  EXPECT_EQ(got, 3 * kUnit);
  void* q = a.allocate(5 * kUnit, &got, true, &mapped);
  EXPECT_FALSE(mapped);
  EXPECT_EQ(addr(q), addr(p) + 3 * kUnit);
  EXPECT_EQ(a.segments(), 1u);
  EXPECT_EQ(a.reserved(), 16 * kUnit);
  EXPECT_EQ(a.in_use(), 8 * kUnit);
  EXPECT_EQ(a.largest_free_block(), 8 * kUnit);
}

TEST_F(BlockArenaTest, ReleasedNeighboursMergeBackIntoOneBlock) {
  BlockArena a(source(), options());
  size_t got = 0;
  void* x = a.allocate(4 * kUnit, &got, true);
  void* y = a.allocate(4 * kUnit, &got, true);
  void* z = a.allocate(4 * kUnit, &got, true);
  ASSERT_TRUE(x && y && z);
  EXPECT_TRUE(a.release(x));
  EXPECT_TRUE(a.release(z));  // merges with the 4 free units after it
  EXPECT_EQ(a.largest_free_block(), 8 * kUnit);
  EXPECT_TRUE(a.release(y));  // merges with both sides: the whole segment again
  EXPECT_EQ(a.largest_free_block(), 16 * kUnit);
  EXPECT_EQ(a.in_use(), 0u);
  void* whole = a.allocate(16 * kUnit, &got, false);
  EXPECT_EQ(whole, x);
}

TEST_F(BlockArenaTest, TakesTheSmallestFreeBlockThatFits) {
  BlockArena a(source(), options());
  size_t got = 0;
  void* b6 = a.allocate(6 * kUnit, &got, true);
  void* sep1 = a.allocate(kUnit, &got, true);
  void* b3 = a.allocate(3 * kUnit, &got, true);
  void* sep2 = a.allocate(kUnit, &got, true);
  ASSERT_TRUE(b6 && sep1 && b3 && sep2);
  a.release(b6);
  a.release(b3);  // free: 6 units, 3 units, and the segment's last 5
  EXPECT_EQ(a.allocate(3 * kUnit, &got, false), b3);
  EXPECT_EQ(addr(a.allocate(5 * kUnit, &got, false)), addr(sep2) + kUnit);  // the tail of 5, not the 6
  EXPECT_EQ(a.allocate(4 * kUnit, &got, false), b6);                       // now only the 6 fits
  EXPECT_EQ(got, 4 * kUnit);                                               // split: 2 units are left
}

TEST_F(BlockArenaTest, ARemainderUnderMinSplitStaysWithItsBlock) {
  BlockArena a(source(), options());
  size_t got = 0;
  void* p = a.allocate(15 * kUnit, &got, true);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(got, 16 * kUnit);  // one unit left over: under min_split (2)
  EXPECT_EQ(a.in_use(), 16 * kUnit);
  EXPECT_EQ(a.largest_free_block(), 0u);
}

TEST_F(BlockArenaTest, ALargeRequestGetsASegmentOfItsOwnRoundedUp) {
  BlockArena a(source(), options());
  size_t got = 0;
  void* p = a.allocate(17 * kUnit, &got, true);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(FakeSource::mapped.size(), 1u);
  EXPECT_EQ(FakeSource::mapped.begin()->second, 20 * kUnit);  // 17 rounded to 4 units
  EXPECT_EQ(got, 17 * kUnit);                                 // 3 units split off
  EXPECT_EQ(a.largest_free_block(), 3 * kUnit);
}

TEST_F(BlockArenaTest, MapsOnlyWhenAllowedAndReportsFailure) {
  BlockArena a(source(), options());
  size_t got = 0;
  bool mapped = true;
  EXPECT_EQ(a.allocate(kUnit, &got, false, &mapped), nullptr);
  EXPECT_FALSE(mapped);
  EXPECT_TRUE(FakeSource::mapped.empty());
  FakeSource::fail = true;
  EXPECT_EQ(a.allocate(kUnit, &got, true, &mapped), nullptr);
  EXPECT_EQ(a.reserved(), 0u);
}

TEST_F(BlockArenaTest, ReleaseRefusesForeignPointersAndCatchesDoubleRelease) {
  BlockArena a(source(), options());
  size_t got = 0;
  void* p = a.allocate(2 * kUnit, &got, true);
  int local = 0;
  EXPECT_FALSE(a.release(&local));
  EXPECT_FALSE(a.release(reinterpret_cast<char*>(p) + kUnit));  // inside a block, not its start
  EXPECT_TRUE(a.release(p));
  EXPECT_THROW(a.release(p), Error);
}

TEST_F(BlockArenaTest, ShrinkGivesBackIdleSegmentsLongestIdleFirst) {
  BlockArena a(source(), options());
  size_t got = 0;
  void* s1 = a.allocate(16 * kUnit, &got, true);
  void* s2 = a.allocate(16 * kUnit, &got, true);
  void* s3 = a.allocate(16 * kUnit, &got, true);
  ASSERT_EQ(a.segments(), 3u);
  a.release(s2);  // idle first
  a.release(s1);
  EXPECT_EQ(a.shrink_to(32 * kUnit), 16 * kUnit);
  EXPECT_EQ(FakeSource::mapped.count(addr(s2)), 0u);
  EXPECT_EQ(FakeSource::mapped.count(addr(s1)), 1u);
  EXPECT_EQ(a.shrink_to(0), 16 * kUnit);  // s3 is in use: it stays
  EXPECT_EQ(a.segments(), 1u);
  EXPECT_EQ(a.reserved(), 16 * kUnit);
  a.release(s3);
  a.shrink_to(0);
  EXPECT_TRUE(FakeSource::mapped.empty());
}

TEST_F(BlockArenaTest, DestructorUnmapsEverySegment) {
  {
    BlockArena a(source(), options());
    size_t got = 0;
    a.allocate(3 * kUnit, &got, true);
    a.allocate(30 * kUnit, &got, true);
    EXPECT_EQ(FakeSource::mapped.size(), 2u);
  }
  EXPECT_TRUE(FakeSource::mapped.empty());
}

TEST_F(BlockArenaTest, RandomTrafficAgainstABruteForceModel) {
  // Live blocks must lie inside mapped segments, never overlap, and add up to in_use(); once all
  // are released every segment is one free block again and shrink_to(0) returns them all.
  BlockArena a(source(), options());
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<size_t> size(1, 40 * kUnit);
  std::map<uintptr_t, size_t> live;  // address -> size given
  for (int step = 0; step < 4000; ++step) {
    if (live.empty() || rng() % 100 < 55) {
      const size_t want = size(rng);
      size_t got = 0;
      void* p = a.allocate(want, &got, true);
      ASSERT_NE(p, nullptr);
      ASSERT_GE(got, want);
      ASSERT_LT(got, want + kUnit + 2 * kUnit);  // the granule's rounding, then a remainder under min_split
      EXPECT_EQ(addr(p) % kUnit, 0u);
      live[addr(p)] = got;
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      ASSERT_TRUE(a.release(reinterpret_cast<void*>(it->first)));
      live.erase(it);
    }
    size_t total = 0;
    uintptr_t end = 0;
    for (const auto& [p, n] : live) {
      ASSERT_GE(p, end) << "blocks overlap at step " << step;
      auto seg = FakeSource::mapped.upper_bound(p);
      ASSERT_NE(seg, FakeSource::mapped.begin());
      --seg;
      ASSERT_LE(p + n, seg->first + seg->second) << "a block leaves its segment at step " << step;
      end = p + n;
      total += n;
    }
    ASSERT_EQ(a.in_use(), total);
  }
  for (const auto& [p, n] : live) a.release(reinterpret_cast<void*>(p));
  size_t largest_segment = 0, reserved = 0;
  for (const auto& [p, n] : FakeSource::mapped) {
    largest_segment = std::max(largest_segment, n);
    reserved += n;
  }
  EXPECT_EQ(a.reserved(), reserved);
  EXPECT_EQ(a.largest_free_block(), largest_segment);
  EXPECT_EQ(a.shrink_to(0), reserved);
  EXPECT_TRUE(FakeSource::mapped.empty());
}

TEST_F(BlockArenaTest, AMisalignedSegmentIsGivenBackAndIsAClearError) {
  BlockArena a({[](size_t bytes) { return static_cast<void*>(static_cast<char*>(FakeSource::map(bytes)) + 64); },
                [](void* p, size_t bytes) { FakeSource::unmap(static_cast<char*>(p) - 64, bytes); }},
               options());
  size_t got = 0;
  EXPECT_THROW(a.allocate(kUnit, &got, true), Error);
  EXPECT_TRUE(FakeSource::mapped.empty());
  EXPECT_EQ(a.reserved(), 0u);
}

TEST_F(BlockArenaTest, RejectsAGranuleThatIsNotAPowerOfTwo) {
  EXPECT_THROW(BlockArena(source(), {16 * kUnit, 4 * kUnit, 3000, 2 * kUnit}), Error);
}

}  // namespace
