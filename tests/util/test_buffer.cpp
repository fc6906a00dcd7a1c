// Buffers for tensors and packed weights (qkv/util/buffer.h): aligned, usable to the last byte, and
// advised for 2 MiB pages from their life's threshold up where the kernel has transparent huge pages.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "qkv/util/buffer.h"

namespace qkv {
namespace {

// The system's THP mode, the bracketed word of /sys/kernel/mm/transparent_hugepage/enabled
// ("always [madvise] never"); empty when the kernel has none.
std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(f, line)) return "";
  const size_t lo = line.find('['), hi = line.find(']');
  return lo == std::string::npos || hi == std::string::npos ? "" : line.substr(lo + 1, hi - lo - 1);
}

TEST(Buffer, EverySizeIsAlignedAndWritableToItsLastByte) {
  for (BufferLife life : {BufferLife::kept, BufferLife::recycled}) {
    const size_t big = buffer_huge_page_threshold(life);
    for (size_t bytes :
         {size_t(0), size_t(1), size_t(63), size_t(4096), big - 1, big, big + 1, big + 4 * kHugePageBytes + 12345}) {
      void* p = buffer_alloc(bytes, life);
      ASSERT_NE(p, nullptr) << bytes;
      const uintptr_t a = reinterpret_cast<uintptr_t>(p);
      EXPECT_EQ(a % 64, 0u) << bytes;
      if (bytes >= big && !kBufferAsan) {
        EXPECT_EQ(a % kHugePageBytes, 0u) << bytes;
      }
      const size_t n = bytes == 0 ? 1 : bytes;
      std::memset(p, 0xA5, n);
      EXPECT_EQ(static_cast<unsigned char*>(p)[n - 1], 0xA5) << bytes;
      buffer_free(p, bytes, life);
    }
    buffer_free(nullptr, 123, life);  // no-op
  }
  EXPECT_EQ(buffer_huge_page_threshold(BufferLife::kept), kHugePageBytes);
  EXPECT_EQ(buffer_huge_page_threshold(BufferLife::recycled), 16 * kHugePageBytes);  // glibc's largest mmap threshold
}

// Whether a buffer of `bytes` and `life`, touched, may have huge pages.
bool eligible(size_t bytes, BufferLife life) {
  std::unique_ptr<void, BufferDeleter> p(buffer_alloc(bytes, life), BufferDeleter{bytes, life});
  if (!p) return false;
  std::memset(p.get(), 1, bytes);
  return buffer_huge_page_eligible(p.get());
}

TEST(Buffer, LargeBuffersAreAdvisedForHugePagesAndSmallOnesAreNot) {
  const std::string mode = thp_mode();  // Debian 12's kernel: "madvise"
  const size_t kept = 4 * kHugePageBytes, recycled = buffer_huge_page_threshold(BufferLife::recycled);
  if (mode.empty() || mode == "never") {  // nothing may have huge pages
    EXPECT_FALSE(eligible(kept, BufferLife::kept)) << "mode '" << mode << "'";
  } else if (!kBufferAsan) {  // the large ones advised, or every mapping eligible ("always")
    EXPECT_TRUE(eligible(kept, BufferLife::kept)) << "mode " << mode;
    EXPECT_TRUE(eligible(recycled, BufferLife::recycled)) << "mode " << mode;
  } else if (mode == "madvise") {  // ASan: every buffer from aligned_alloc, which nothing advises
    EXPECT_FALSE(eligible(kept, BufferLife::kept));
  }
  // Below their thresholds buffers live in malloc's memory, which nothing advises: eligible only
  // in mode "always".
  if (mode != "always") {
    EXPECT_FALSE(eligible(4096, BufferLife::kept)) << "mode '" << mode << "'";
    EXPECT_FALSE(eligible(recycled / 2, BufferLife::recycled)) << "mode '" << mode << "'";
  }
}

}  // namespace
}  // namespace qkv
