// qkv/util/buffer.h - 64-byte aligned memory for tensors and packed weights, on 2 MiB pages when large.
//
// Large buffers are read as long streams (a decoding step's weights, the optimizer's state, a
// batch's activations). With 4 KiB pages every 4 KiB of a stream needs its own TLB entry, and in a
// VM a miss is a nested (two-level) page walk. So a large buffer gets a mapping of its own,
// aligned to 2 MiB and advised MADV_HUGEPAGE: Debian's kernel gives transparent huge pages only to
// memory so advised (its default mode is "madvise"), and malloc never advises. Measured on AMD
// EPYC Zen 4 (2 vCPUs, BENCHMARKS.md): two threads summing 512 MB read 33 GB/s on 2 MiB pages
// against 26 on 4 KiB pages (medians, alternating); GPT-2 124M generation with every weight on
// them, 4-13% faster (two sittings).
//
// A fresh mapping costs its pages' zeroing when first touched (all of each 2 MiB page), where
// malloc reuses freed heap memory untouched by the kernel. So how large "large" is depends on the
// buffer's life (BufferLife): a long-lived one from 2 MiB (a packed weight copy; a segment of the
// tensors' BlockArena, qkv/tensor/storage.h, which keeps its segments and reuses them step after
// step); one freed and remade as shapes change from 32 MiB, the size from which glibc's malloc maps
// every request afresh anyway (its largest dynamic mmap threshold). Tensors once had a mapping
// each from 2 MiB: 6-15% slower on the demo's translation training, whose activations change shape
// from step to step, since freed blocks came back as fresh mappings (the kernel's clear_page 3.4%
// of the samples); and parameters on mappings of their own raised its peak memory by 50-90 MB
// through glibc's heap (BENCHMARKS.md). The arena has neither cost.
//
// Under AddressSanitizer every buffer comes from aligned_alloc, so that its bounds stay checked.
#pragma once
#include <cstddef>

namespace qkv {

constexpr size_t kHugePageBytes = size_t(2) << 20;

// Whether this code is built with AddressSanitizer (then nothing is mapped: see above).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kBufferAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kBufferAsan = true;
#else
constexpr bool kBufferAsan = false;
#endif
#else
constexpr bool kBufferAsan = false;
#endif

enum class BufferLife {
  kept,      // made once and kept (packed weight copies, the tensors' arena segments): 2 MiB pages from 2 MiB
  recycled,  // freed and remade as shapes change (Storage's small blocks): 2 MiB pages from 32 MiB
};

// The smallest buffer of `life` that gets a mapping of its own on 2 MiB pages.
size_t buffer_huge_page_threshold(BufferLife life);

// At least `bytes` (0 is taken as 1), 64-byte aligned; 2 MiB aligned when mapped (see above).
// Contents unspecified. nullptr when the system has no memory for it.
void* buffer_alloc(size_t bytes, BufferLife life);

// Returns what buffer_alloc(bytes, life) gave, with the same `bytes` and `life`. p may be null.
void buffer_free(void* p, size_t bytes, BufferLife life) noexcept;

// For owning pointers: std::unique_ptr<T, BufferDeleter>(p, BufferDeleter{bytes, life}).
struct BufferDeleter {
  size_t bytes = 0;
  BufferLife life = BufferLife::kept;
  void operator()(const void* p) const noexcept { buffer_free(const_cast<void*>(p), bytes, life); }
};

// Whether the kernel may back the mapping that holds p with huge pages (/proc/self/smaps's
// "THPeligible: 1" for it: advised, or the system mode "always", and room for an aligned 2 MiB
// page). For tests; false where smaps cannot be read or has no such line.
bool buffer_huge_page_eligible(const void* p);

}  // namespace qkv
