// qkv/tensor/rng.h - the one seedable RNG: Philox4x32-10 (Salmon et al. 2011), counter-based.
// A draw of n numbers reserves a counter range; number i depends only on (seed, base + i), so
// results are identical for any thread count and any split of the work.
#pragma once
#include <array>
#include <cstdint>

namespace qkv {

std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo);
// The same for nblocks consecutive counters: out[4 * i + j] = philox4x32(key, counter_hi,
// counter_lo + i)[j]. Bit-identical to the one-block function, computed 16 blocks at a time in
// SIMD lanes (dropout masks draw millions of blocks per training step).
void philox4x32_blocks(uint64_t key, uint64_t counter_hi, uint64_t counter_lo, int64_t nblocks, uint32_t* out);

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  void manual_seed(uint64_t seed) { seed_ = seed; offset_ = 0; }
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }  // blocks of 4 draws consumed so far
  void set_state(uint64_t seed, uint64_t offset) { seed_ = seed; offset_ = offset; }

  // Reserves ceil(n / 4) Philox blocks and returns the first block's counter.
  uint64_t reserve(uint64_t n);

  void uniform(float* out, int64_t n, float lo = 0.f, float hi = 1.f);   // [lo, hi)
  void uniform(double* out, int64_t n, double lo = 0., double hi = 1.);
  void normal(float* out, int64_t n, float mean = 0.f, float std = 1.f);  // Box-Muller
  void normal(double* out, int64_t n, double mean = 0., double std = 1.);
  uint64_t randint(uint64_t bound);  // uniform in [0, bound)
  double uniform1();                 // one uniform double in [0, 1)

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// Uniform float in [0, 1) from one 32-bit Philox output (24 random mantissa bits).
inline float u32_to_unit_float(uint32_t x) { return float(x >> 8) * (1.0f / 16777216.0f); }

Generator& default_generator();
void manual_seed(uint64_t seed);  // seeds default_generator()

}  // namespace qkv
