// qkv/util/checksum.h - CRC-32C (Castagnoli polynomial 0x1EDC6F41, reflected 0x82F63B78; the
// checksum of iSCSI, RFC 3720 appendix B.4, ext4 and Btrfs), used to detect corrupted tensor bytes
// in the safetensors files qkv writes. SSE4.2's crc32 instruction computes it where available
// (about 8 bytes per cycle, so checking a checkpoint costs far less than reading it), a table
// otherwise; both give the same value.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace qkv {

// CRC-32C of n bytes, continuing from a previous value (0 to start): crc32c("123456789") = 0xE3069283.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

// "e3069283": eight lowercase hex digits, the form stored in file metadata.
std::string crc32c_hex(uint32_t crc);

}  // namespace qkv
