// Buffers for tensors and packed weights (qkv/util/buffer.h): aligned, usable to the last byte, on
// 2 MiB pages from 2 MiB up where the kernel has transparent huge pages.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "qkv/util/buffer.h"

namespace qkv {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

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
  for (size_t bytes : {size_t(0), size_t(1), size_t(63), size_t(4096), kHugePageBytes - 1, kHugePageBytes,
                       kHugePageBytes + 1, 3 * kHugePageBytes + 12345}) {
    void* p = buffer_alloc(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    EXPECT_EQ(a % 64, 0u) << bytes;
    if (bytes >= kHugePageBytes && !kAsan) {
      EXPECT_EQ(a % kHugePageBytes, 0u) << bytes;
    }
    const size_t n = bytes == 0 ? 1 : bytes;
    std::memset(p, 0xA5, n);
    EXPECT_EQ(static_cast<unsigned char*>(p)[n - 1], 0xA5) << bytes;
    buffer_free(p, bytes);
  }
  buffer_free(nullptr, 123);  // no-op
}

TEST(Buffer, LargeBuffersAreAdvisedForHugePagesAndSmallOnesAreNot) {
  const std::string mode = thp_mode();  // Debian 12's kernel: "madvise"
  const size_t bytes = 4 * kHugePageBytes;
  std::unique_ptr<void, BufferDeleter> big(buffer_alloc(bytes), BufferDeleter{bytes});
  std::unique_ptr<void, BufferDeleter> small(buffer_alloc(4096), BufferDeleter{4096});
  ASSERT_NE(big, nullptr);
  ASSERT_NE(small, nullptr);
  std::memset(big.get(), 1, bytes);
  if (mode.empty() || mode == "never") {  // nothing may have huge pages
    EXPECT_FALSE(buffer_huge_page_eligible(big.get())) << "mode '" << mode << "'";
  } else if (!kAsan) {  // the large one advised, or every mapping eligible ("always")
    EXPECT_TRUE(buffer_huge_page_eligible(big.get())) << "mode " << mode;
  } else if (mode == "madvise") {  // ASan: both from aligned_alloc, which nothing advises
    EXPECT_FALSE(buffer_huge_page_eligible(big.get()));
  }
  // A small buffer lives in malloc's heap, which nothing advises: eligible only in mode "always".
  if (mode != "always") {
    EXPECT_FALSE(buffer_huge_page_eligible(small.get())) << "mode '" << mode << "'";
  }
}

}  // namespace
}  // namespace qkv
