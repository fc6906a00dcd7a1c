// qkv/io/format/safetensors_reader.h - a safetensors file read tensor by tensor.
//
// safetensors::load() returns every tensor at once. A loader that fills a model needs only one
// tensor at a time: Reader reads and checks the header when it opens the file (every check of
// load(): sizes, offsets, dtypes, shapes, overlaps, holes, the checksum entries), then reads a
// tensor's bytes from the file only when asked, and verifies its CRC-32C then. So the file is
// never held whole beside the model it fills (GPT-2 124M: 500 MB instead of 1 GB).
//   safetensors::Reader f("model.safetensors");
//   for (const auto& name : f.names()) use(name, f.read(name));   // or f.read_into(name, param)
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "qkv/tensor/tensor.h"

namespace qkv::safetensors {

class Reader {
 public:
  explicit Reader(const std::string& path);  // reads and checks the header; errors name the file
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  const std::string& path() const { return path_; }
  std::vector<std::string> names() const;  // in name order
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  Shape shape(const std::string& name) const;  // throws naming the file if absent
  DType dtype(const std::string& name) const;
  // A new contiguous tensor with the bytes of `name`, its checksum verified if the file has them.
  Tensor read(const std::string& name) const;
  // The same bytes straight into dst (contiguous, of the tensor's shape and dtype: a model's
  // parameter, so no second copy is made), then dst.mark_modified(). On a checksum mismatch dst
  // holds the bad bytes and the error names the tensor.
  void read_into(const std::string& name, Tensor& dst) const;
  // The bytes of `name` in order, in pieces of at most piece_bytes: take(bytes, n) for each, from
  // a buffer reused between pieces (a loader converting as it reads: no whole copy of the tensor).
  // The checksum is verified after the last piece; on a mismatch the error names the tensor, and
  // what take() made of the bytes is bad.
  void read_pieces(const std::string& name, size_t piece_bytes,
                   const std::function<void(const void*, size_t)>& take) const;

  const std::map<std::string, std::string>& metadata() const { return metadata_; }  // checksums left out
  bool has_checksums() const { return has_checksums_; }  // verified by each read()

  struct Entry {  // one tensor of the header
    DType dtype = DType::f32;
    std::vector<int64_t> dims;
    uint64_t begin = 0, end = 0;  // offsets in the data buffer
    std::optional<uint32_t> crc;  // the CRC-32C qkv recorded, if any
  };

 private:
  const Entry& entry(const std::string& name) const;
  std::string path_;
  int fd_ = -1;
  uint64_t data_start_ = 0;  // file offset of the data buffer
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
  bool has_checksums_ = false;
};

}  // namespace qkv::safetensors
