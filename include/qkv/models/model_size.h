// Upper bounds on a model's hyper-parameters, checked by every config's validate() before anything
// is allocated: a mistyped size (n_layer 4294967297, n_positions 1e9) must be an error naming the
// key, not an allocation that grows until the machine runs out of memory.
#pragma once
#include <cstdint>

namespace qkv::models {

inline constexpr int64_t kMaxVocab = int64_t(1) << 24;      // as tokenizer.vocab_size
inline constexpr int64_t kMaxPositions = int64_t(1) << 20;  // positions (context, max_len)
inline constexpr int64_t kMaxWidth = int64_t(1) << 16;      // model width
inline constexpr int64_t kMaxFfnWidth = int64_t(1) << 20;   // FFN inner width
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxBatch = int64_t(1) << 20;    // sequences in a batch (a training data section)

// Throws qkv::Error from `where` unless lo <= value <= hi, naming `key`.
void check_size(const char* where, const char* key, int64_t value, int64_t lo, int64_t hi);

// Throws when `parameters` fp32 values would not fit in this machine's physical memory, saying how
// many there are and how much memory they need.
void check_parameters_fit(const char* where, double parameters);

}  // namespace qkv::models
