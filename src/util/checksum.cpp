#include "qkv/util/checksum.h"

#include <array>
#include <cstring>

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

namespace qkv {
namespace {

// Byte-at-a-time table for the reflected polynomial: the portable path and the tail bytes.
constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kTable = make_table();

}  // namespace

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;  // the register starts at all ones and the result is inverted (RFC 3720)
#if defined(__SSE4_2__)
  uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);  // unaligned, little-endian: the byte order the CRC consumes
    c64 = _mm_crc32_u64(c64, word);
  }
  c = uint32_t(c64);
#endif
  for (; n > 0; --n, ++p) c = kTable[(c ^ *p) & 0xff] ^ (c >> 8);
  return ~c;
}

std::string crc32c_hex(uint32_t crc) {
  static const char digits[] = "0123456789abcdef";
  std::string s(8, '0');
  for (int i = 7; i >= 0; --i, crc >>= 4) s[size_t(i)] = digits[crc & 0xf];
  return s;
}

}  // namespace qkv
