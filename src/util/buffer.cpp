// Large buffers as mappings of their own on 2 MiB pages (qkv/util/buffer.h).
#include "qkv/util/buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace qkv {
namespace {

constexpr size_t kAlign = 64;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

size_t page_bytes() {
  static const size_t page = size_t(sysconf(_SC_PAGESIZE));
  return page;
}

bool mapped(size_t bytes, BufferLife life) { return !kBufferAsan && bytes >= buffer_huge_page_threshold(life); }

}  // namespace

size_t buffer_huge_page_threshold(BufferLife life) {
  return life == BufferLife::kept ? kHugePageBytes : 16 * kHugePageBytes;
}

void* buffer_alloc(size_t bytes, BufferLife life) {
  if (bytes == 0) bytes = 1;
  if (!mapped(bytes, life)) return std::aligned_alloc(kAlign, round_up(bytes, kAlign));
  // Map 2 MiB more than needed, then unmap the head before the first 2 MiB boundary and the tail.
  const size_t len = round_up(bytes, page_bytes()), span = len + kHugePageBytes;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(raw), start = round_up(lo, kHugePageBytes);
  if (start > lo) munmap(raw, start - lo);
  if (lo + span > start + len) munmap(reinterpret_cast<void*>(start + len), lo + span - (start + len));
  // A hint: a kernel without transparent huge pages refuses it, and 4 KiB pages serve.
  madvise(reinterpret_cast<void*>(start), len, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(start);
}

void buffer_free(void* p, size_t bytes, BufferLife life) noexcept {
  if (!p) return;
  if (bytes == 0) bytes = 1;
  if (mapped(bytes, life))
    munmap(p, round_up(bytes, page_bytes()));
  else
    std::free(p);
}

bool buffer_huge_page_eligible(const void* p) {
  FILE* f = std::fopen("/proc/self/smaps", "r");
  if (!f) return false;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  char line[512];
  bool inside = false, eligible = false;
  while (std::fgets(line, sizeof line, f)) {
    unsigned long lo = 0, hi = 0;
    char dash = 0;
    // A mapping's header: "lo-hi perms offset dev inode [path]"; its fields follow, one a line.
    if (std::sscanf(line, "%lx%c%lx ", &lo, &dash, &hi) == 3 && dash == '-') {
      if (inside) break;
      inside = a >= lo && a < hi;
    } else if (inside && std::strncmp(line, "THPeligible:", 12) == 0) {
      eligible = std::atoi(line + 12) == 1;
      break;
    }
  }
  std::fclose(f);
  return eligible;
}

}  // namespace qkv
