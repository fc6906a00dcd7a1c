// The caching allocator behind tensors (qkv/tensor/storage.h): small blocks by size class, large
// ones from BlockArena segments on 2 MiB pages (off under AddressSanitizer), and the bound on
// tensor memory when shapes change every step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "qkv/tensor/tensor.h"
#include "qkv/util/buffer.h"
#include "qkv/util/error.h"

using namespace qkv;

namespace {

constexpr int64_t kFloatsPerMiB = (1 << 20) / 4;

TEST(Storage, IsAlignedAndReused) {
  allocator_empty_cache();
  void* first;
  {
    Tensor a = Tensor::empty({1000});
    first = a.raw_data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  }
  auto before = allocator_stats();
  Tensor b = Tensor::empty({1000});
  auto after = allocator_stats();
  EXPECT_EQ(b.raw_data(), first);
  EXPECT_EQ(after.system_allocs, before.system_allocs);
}

TEST(Storage, SmallFreeBlockServesASmallerRequestUpToTwiceItsSize) {
  allocator_empty_cache();
  void* first;
  {
    Tensor a = Tensor::empty({10000});  // 40 kB
    first = a.raw_data();
  }
  auto before = allocator_stats();
  {
    Tensor b = Tensor::empty({6000});  // 24 kB: another size class, within 2x
    EXPECT_EQ(b.raw_data(), first);
    EXPECT_EQ(allocator_stats().system_allocs, before.system_allocs);
  }
  Tensor c = Tensor::empty({4000});  // 16 kB: under half, a block of its own
  EXPECT_NE(c.raw_data(), first);
  EXPECT_EQ(allocator_stats().system_allocs, before.system_allocs + 1);
}

TEST(Storage, FreedLargeMemoryServesOtherShapes) {
  if (kBufferAsan) GTEST_SKIP() << "under AddressSanitizer every tensor has an allocation of its own";
  allocator_empty_cache();
  void* big_at;
  {
    Tensor big = Tensor::empty({8 * kFloatsPerMiB});
    big_at = big.raw_data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(big_at) % 4096, 0u);
  }
  const AllocatorStats before = allocator_stats();
  // 3 + 5 MiB fit where the 8 MiB were, whatever else the segments hold: no new system memory.
  Tensor a = Tensor::empty({3 * kFloatsPerMiB});
  Tensor b = Tensor::empty({5 * kFloatsPerMiB});
  EXPECT_EQ(allocator_stats().system_allocs, before.system_allocs);
  EXPECT_EQ(allocator_stats().cache_hits, before.cache_hits + 2);
  a = Tensor();
  b = Tensor();
  Tensor again = Tensor::empty({8 * kFloatsPerMiB});  // the parts merged back: 8 MiB free in one piece
  EXPECT_EQ(allocator_stats().system_allocs, before.system_allocs);
}

TEST(Storage, LargeTensorsMayHaveHugePages) {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(f, modes);
  if (kBufferAsan || modes.find("[never]") != std::string::npos || modes.empty())
    GTEST_SKIP() << "no arena (ASan) or no transparent huge pages: '" << modes << "'";
  Tensor t = Tensor::zeros({4 * kFloatsPerMiB});
  EXPECT_TRUE(buffer_huge_page_eligible(t.raw_data()));
}

TEST(Storage, MoreMemoryThanTheSystemHasIsAClearErrorAndTheCacheStaysUsable) {
  std::ifstream f("/proc/sys/vm/overcommit_memory");
  int overcommit = 0;
  f >> overcommit;
  if (kBufferAsan || overcommit == 1)  // ASan aborts on such a request; mode 1 maps anything
    GTEST_SKIP() << "AddressSanitizer, or vm.overcommit_memory = 1";
  Tensor keep = Tensor::ones({2 * kFloatsPerMiB});
  try {
    Tensor::empty({int64_t(1) << 42});  // 16 TiB
    FAIL() << "a 16 TiB tensor was allocated";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(keep.to_vector<float>()[2 * kFloatsPerMiB - 1], 1.0f);  // what was live is untouched
  Tensor after = Tensor::ones({3 * kFloatsPerMiB});
  EXPECT_EQ(after.to_vector<float>().back(), 1.0f);
}

TEST(Storage, TensorMemoryStaysWithinTwiceTheLargestLiveSet) {
  // Shapes that change every step, as token-budget batches do: three live tensors of random
  // sizes (64 k to 2 M floats) per step. Caching every size class seen would hold 173 MB here
  // against a live set of at most 22.5 MB. Bound: twice the largest live set, and one 16 MiB
  // segment of the arena. Once the arena has warmed up, no step needs new memory.
  allocator_empty_cache();
  const size_t base = allocator_stats().bytes_in_use;
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> n(64 * 1024, 2 * 1024 * 1024);
  size_t live_max = 0, allocs_at_half = 0;
  for (int step = 0; step < 300; ++step) {
    if (step == 150) allocs_at_half = allocator_stats().system_allocs;
    std::vector<Tensor> live;
    for (int i = 0; i < 3; ++i) {
      live.push_back(Tensor::empty({n(rng)}));
      const AllocatorStats s = allocator_stats();
      live_max = std::max(live_max, s.bytes_in_use - base);
      ASSERT_LE(s.bytes_in_use + s.bytes_cached, base + 2 * (live_max + base) + 8 * kHugePageBytes)
          << "step " << step;
    }
  }
  const AllocatorStats s = allocator_stats();
  EXPECT_GT(s.cache_hits, 0u);
  if (!kBufferAsan) {
    EXPECT_EQ(s.system_allocs, allocs_at_half);
  }
}

}  // namespace
