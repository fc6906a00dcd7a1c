// qkv/util/buffer.h - 64-byte aligned memory for tensors and packed weights, on 2 MiB pages when large.
//
// Large buffers are read as long streams (a decoding step's weights, the optimizer's state, a
// batch's activations). With 4 KiB pages every 4 KiB of a stream needs its own TLB entry, and in a
// VM a miss is a nested (two-level) page walk. So a buffer of 2 MiB or more gets a mapping of its
// own, aligned to 2 MiB and advised MADV_HUGEPAGE: Debian's kernel gives transparent huge pages only
// to memory so advised (its default mode is "madvise"), and malloc never advises. Measured on AMD
// EPYC Zen 4 (2 vCPUs, BENCHMARKS.md): two threads summing 512 MB read 34 GB/s on 2 MiB pages
// against 26 on 4 KiB pages (medians, alternating). Smaller buffers come from aligned_alloc.
//
// Under AddressSanitizer every buffer comes from aligned_alloc, so that its bounds stay checked.
#pragma once
#include <cstddef>

namespace qkv {

constexpr size_t kHugePageBytes = size_t(2) << 20;

// At least `bytes` (0 is taken as 1), 64-byte aligned; 2 MiB aligned from kHugePageBytes up.
// Contents unspecified. nullptr when the system has no memory for it.
void* buffer_alloc(size_t bytes);

// Returns what buffer_alloc(bytes) gave, with the same `bytes`. p may be null.
void buffer_free(void* p, size_t bytes) noexcept;

// For owning pointers: std::unique_ptr<T, BufferDeleter>(p, BufferDeleter{bytes}).
struct BufferDeleter {
  size_t bytes = 0;
  void operator()(const void* p) const noexcept { buffer_free(const_cast<void*>(p), bytes); }
};

// Whether the kernel may back the mapping that holds p with huge pages (/proc/self/smaps's
// "THPeligible: 1" for it: advised, or the system mode "always", and room for an aligned 2 MiB
// page). For tests; false where smaps cannot be read or has no such line.
bool buffer_huge_page_eligible(const void* p);

}  // namespace qkv
