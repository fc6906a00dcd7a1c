// qkv/io/format/safetensors.h - the safetensors format (huggingface/safetensors), written from its spec:
//   [u64 little-endian N][N bytes of JSON header][byte buffer]
//   header: {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//            "__metadata__": {"key": "value"}}; offsets are relative to the byte buffer.
// The loader checks every size, offset, dtype and shape, that tensors do not overlap and that
// the buffer has no holes; errors name the file and the tensor.
//
// Integrity: save() records the CRC-32C of every tensor's bytes in __metadata__, under
// "qkv.crc32c.<tensor name>" (8 hex digits), and load()/parse() verify them when present, so a
// truncated or bit-flipped checkpoint is refused at load, naming the tensor and both checksums.
// Files written by other tools carry no such entries and load as before. The entries are
// consumed by the loader (Contents::metadata does not show them) and never copied from the
// metadata a caller passes to save(): they always describe the bytes being written.
#pragma once
#include <map>
#include <string>

#include "qkv/tensor/tensor.h"

namespace qkv::safetensors {

inline constexpr const char* kChecksumPrefix = "qkv.crc32c.";

struct Contents {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
  bool checksummed = false;  // the file recorded checksums and every one matched
};

Contents load(const std::string& path);
Contents parse(const std::string& bytes, const std::string& source_name);
// Atomic (temporary file, fsync, rename). Tensors are written in name order; bf16 tensors (weights
// held in bf16 for inference) as F32, widened exactly, so every checkpoint qkv writes is fp32.
void save(const std::string& path, const std::map<std::string, Tensor>& tensors,
          const std::map<std::string, std::string>& metadata = {});
std::string serialize(const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace qkv::safetensors
