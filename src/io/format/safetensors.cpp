#include "qkv/io/format/safetensors.h"
#include "qkv/io/format/safetensors_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "qkv/tensor/held_int8.h"
#include "qkv/util/checksum.h"
#include "qkv/util/file.h"

namespace qkv::safetensors {
namespace {

using json = nlohmann::json;

const char* st_dtype(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::u8: return "U8";
    case DType::boolean: return "BOOL";
    case DType::bf16: return "BF16";
    case DType::i8: return "I8";
  }
  return "?";
}

bool parse_dtype(const std::string& s, DType& out) {
  static const std::pair<const char*, DType> table[] = {{"F32", DType::f32}, {"F64", DType::f64},
                                                        {"I32", DType::i32}, {"I64", DType::i64},
                                                        {"U8", DType::u8},   {"BOOL", DType::boolean}};
  for (auto& [name, t] : table)
    if (s == name) { out = t; return true; }
  return false;
}

bool is_checksum_key(const std::string& key) { return key.rfind(kChecksumPrefix, 0) == 0; }

uint32_t parse_hex32(const std::string& s, bool& ok) {
  ok = s.size() == 8;
  uint32_t v = 0;
  for (char c : s) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) ok = false;
    v = (v << 4) | uint32_t(d & 0xf);
  }
  return v;
}

// The header's tensors and metadata, checked: every entry's dtype, shape and offsets, no overlap
// and no hole in the data buffer, and qkv's checksum entries (one per tensor or none, each 8 hex
// digits), which are moved out of the metadata callers see. h: the n header bytes; buf_size: the
// bytes after them.
struct Index {
  std::map<std::string, Reader::Entry> entries;
  std::map<std::string, std::string> metadata;
  bool has_checksums = false;
};

Index index_header(const char* h, uint64_t n, uint64_t buf_size, const std::string& src) {
  json header;
  try {
    header = json::parse(h, h + n);
  } catch (const json::exception& e) {
    fail(src, "header is not valid JSON: ", e.what());
  }
  QKV_CHECK(header.is_object(), src, "header must be a JSON object");
  Index out;
  struct Span { uint64_t begin, end; std::string name; };
  std::vector<Span> spans;
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      QKV_CHECK(entry.is_object(), src, "__metadata__ must be an object of strings");
      for (auto& [k, v] : entry.items()) {
        QKV_CHECK(v.is_string(), src, "__metadata__.", k, " must be a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    std::string where = src + ": tensor '" + name + "'";
    QKV_CHECK(entry.is_object() && entry.contains("dtype") && entry.contains("shape") && entry.contains("data_offsets"),
              where, "needs dtype, shape and data_offsets");
    QKV_CHECK(entry["dtype"].is_string(), where, "dtype must be a string");
    Reader::Entry e;
    std::string dts = entry["dtype"].get<std::string>();
    QKV_CHECK(parse_dtype(dts, e.dtype), where, "unsupported dtype '", dts, "' (expected F32, F64, I32, I64, U8 or BOOL)");
    QKV_CHECK(entry["shape"].is_array() && entry["shape"].size() <= size_t(kMaxDims), where,
              "shape must be an array of at most ", kMaxDims, " extents");
    uint64_t numel = 1;
    for (auto& d : entry["shape"]) {
      QKV_CHECK(d.is_number_unsigned() || (d.is_number_integer() && d.get<int64_t>() >= 0), where,
                "shape extents must be non-negative integers");
      uint64_t v = d.get<uint64_t>();
      QKV_CHECK(v < (uint64_t(1) << 40) && (v == 0 || numel <= (uint64_t(1) << 40) / v), where, "shape too large");
      numel *= v;
      e.dims.push_back(int64_t(v));
    }
    auto& off = entry["data_offsets"];
    QKV_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned(), where,
              "data_offsets must be [begin, end]");
    e.begin = off[0].get<uint64_t>(), e.end = off[1].get<uint64_t>();
    QKV_CHECK(e.begin <= e.end, where, "data_offsets [", e.begin, ", ", e.end, "] end before they begin");
    QKV_CHECK(e.end <= buf_size, where, "data_offsets [", e.begin, ", ", e.end, "] outside the data buffer of ",
              buf_size, " bytes (file truncated?)");
    QKV_CHECK(e.end - e.begin == numel * dtype_size(e.dtype), where, "data_offsets span ", e.end - e.begin, " bytes but ",
              dts, " shape ", Shape(e.dims).str(), " needs ", numel * dtype_size(e.dtype));
    spans.push_back({e.begin, e.end, name});
    out.entries[name] = std::move(e);
  }
  std::sort(spans.begin(), spans.end(), [](const Span& x, const Span& y) { return x.begin < y.begin; });
  uint64_t pos = 0;
  for (const Span& s : spans) {
    QKV_CHECK(s.begin >= pos, src, "tensor '", s.name, "' overlaps the previous tensor (offset ", s.begin, " < ", pos, ")");
    QKV_CHECK(s.begin == pos, src, "hole in the data buffer before tensor '", s.name, "' (bytes ", pos, "..", s.begin, ")");
    pos = s.end;
  }
  QKV_CHECK(pos == buf_size, src, "data buffer has ", buf_size - pos, " trailing bytes that no tensor covers");

  // qkv's checksums: files written elsewhere have none and are accepted as they are; a file with
  // some has one for every tensor.
  std::map<std::string, std::string> recorded;  // tensor name -> hex
  for (auto it = out.metadata.begin(); it != out.metadata.end();) {
    if (!is_checksum_key(it->first)) { ++it; continue; }
    recorded[it->first.substr(std::strlen(kChecksumPrefix))] = it->second;
    it = out.metadata.erase(it);
  }
  if (recorded.empty()) return out;
  for (const auto& [name, hex] : recorded)
    QKV_CHECK(out.entries.count(name), src, "__metadata__ records a checksum (", kChecksumPrefix, name,
              ") for a tensor the file does not hold (header corrupted?)");
  for (auto& [name, e] : out.entries) {
    const std::string where = src + ": tensor '" + name + "'";
    auto it = recorded.find(name);
    QKV_CHECK(it != recorded.end(), where, "has no checksum in __metadata__ although the file records them (expected ",
              kChecksumPrefix, name, "; header corrupted?)");
    bool ok = false;
    e.crc = parse_hex32(it->second, ok);
    QKV_CHECK(ok, where, "__metadata__.", kChecksumPrefix, name, " must be 8 lowercase hex digits, got '", it->second,
              "'");
  }
  out.has_checksums = true;
  return out;
}

// A tensor's bytes against the CRC-32C recorded for it (nothing to do if none was).
// The tensor's bytes against the CRC-32C the file recorded for it (if any): `found`, computed
// over all of them.
void check_crc(const std::string& src, const std::string& name, const Reader::Entry& e, uint32_t found) {
  if (!e.crc) return;
  const uint64_t size = e.end - e.begin;
  QKV_CHECK(found == *e.crc, src + ": tensor '" + name + "'", "corrupted data: CRC-32C of its ", size, " bytes is ",
            crc32c_hex(found), ", the file recorded ", crc32c_hex(*e.crc));
}

void verify_crc(const std::string& src, const std::string& name, const Reader::Entry& e, const void* data) {
  if (e.crc) check_crc(src, name, e, crc32c(data, e.end - e.begin));
}

}  // namespace

Contents parse(const std::string& bytes, const std::string& src) {
  QKV_CHECK(bytes.size() >= 8, src, "truncated safetensors file: ", bytes.size(), " bytes, need at least 8 for the header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  QKV_CHECK(n <= bytes.size() - 8, src, "header length ", n, " runs past the end of the file (", bytes.size(), " bytes)");
  Index index = index_header(bytes.data() + 8, n, bytes.size() - 8 - n, src);
  const char* buf = bytes.data() + 8 + n;
  Contents out;
  out.metadata = std::move(index.metadata);
  for (const auto& [name, e] : index.entries) {
    verify_crc(src, name, e, buf + e.begin);
    out.tensors[name] = Tensor::from_data(buf + e.begin, Shape(e.dims), e.dtype);
  }
  out.checksummed = index.has_checksums;
  return out;
}

Contents load(const std::string& path) {  // tensor by tensor: the file is never held whole
  Reader file(path);
  Contents out;
  for (const std::string& name : file.names()) out.tensors[name] = file.read(name);
  out.metadata = file.metadata();
  out.checksummed = file.has_checksums();
  return out;
}

// ---------------------------------------------------------------- Reader

namespace {

// Reads exactly n bytes at `offset`; a short read means the file changed or was truncated.
void read_exact(int fd, uint64_t offset, void* dst, uint64_t n, const std::string& src, const std::string& what) {
  char* p = static_cast<char*>(dst);
  uint64_t done = 0;
  while (done < n) {
    const size_t chunk = size_t(std::min<uint64_t>(n - done, uint64_t(1) << 30));
    const ssize_t got = ::pread(fd, p + done, chunk, off_t(offset + done));
    if (got < 0 && errno == EINTR) continue;
    QKV_CHECK(got >= 0, src, "read of ", what, " failed at offset ", offset + done, ": ", std::strerror(errno));
    QKV_CHECK(got > 0, src, "unexpected end of file at offset ", offset + done, " while reading ", what,
              " (the file was truncated while open?)");
    done += uint64_t(got);
  }
}

}  // namespace

Reader::Reader(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  QKV_CHECK(fd_ >= 0, path, "cannot open for reading: ", std::strerror(errno));
  try {
    struct stat st;
    QKV_CHECK(::fstat(fd_, &st) == 0, path, "cannot stat: ", std::strerror(errno));
    const uint64_t size = uint64_t(st.st_size);
    QKV_CHECK(size >= 8, path, "truncated safetensors file: ", size, " bytes, need at least 8 for the header length");
    unsigned char len[8];
    read_exact(fd_, 0, len, 8, path, "the header length");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
    QKV_CHECK(n <= size - 8, path, "header length ", n, " runs past the end of the file (", size, " bytes)");
    std::string header(size_t(n), '\0');
    read_exact(fd_, 8, header.data(), n, path, "the header");
    Index index = index_header(header.data(), n, size - 8 - n, path);
    entries_ = std::move(index.entries);
    metadata_ = std::move(index.metadata);
    has_checksums_ = index.has_checksums;
    data_start_ = 8 + n;
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

Reader::~Reader() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<std::string> Reader::names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

const Reader::Entry& Reader::entry(const std::string& name) const {
  auto it = entries_.find(name);
  QKV_CHECK(it != entries_.end(), path_, "no tensor '", name, "' in the file");
  return it->second;
}

Shape Reader::shape(const std::string& name) const { return Shape(entry(name).dims); }

DType Reader::dtype(const std::string& name) const { return entry(name).dtype; }

Tensor Reader::read(const std::string& name) const {
  const Entry& e = entry(name);
  Tensor t = Tensor::empty(Shape(e.dims), e.dtype);
  read_into(name, t);
  return t;
}

void Reader::read_into(const std::string& name, Tensor& dst) const {
  const Entry& e = entry(name);
  QKV_CHECK(dst.defined() && dst.shape() == Shape(e.dims) && dst.dtype() == e.dtype && dst.is_contiguous(), path_,
            "tensor '", name, "' is ", dtype_name(e.dtype), " ", Shape(e.dims).str(),
            ", the destination is ", dst.defined() ? dst.str() : std::string("undefined"),
            dst.defined() && !dst.is_contiguous() ? " (not contiguous)" : "");
  read_exact(fd_, data_start_ + e.begin, dst.raw_data(), e.end - e.begin, path_, "tensor '" + name + "'");
  dst.mark_modified();
  verify_crc(path_, name, e, dst.raw_data());
}

void Reader::read_pieces(const std::string& name, size_t piece_bytes,
                         const std::function<void(const void*, size_t)>& take) const {
  const Entry& e = entry(name);
  QKV_CHECK(piece_bytes > 0, path_, "read_pieces: pieces of 0 bytes");
  std::vector<char> piece(size_t(std::min<uint64_t>(piece_bytes, e.end - e.begin)));
  uint32_t crc = 0;
  for (uint64_t done = 0; done < e.end - e.begin;) {
    const size_t n = size_t(std::min<uint64_t>(piece.size(), e.end - e.begin - done));
    read_exact(fd_, data_start_ + e.begin + done, piece.data(), n, path_, "tensor '" + name + "'");
    crc = crc32c(piece.data(), n, crc);
    take(piece.data(), n);
    done += n;
  }
  check_crc(path_, name, e, crc);
}

namespace {

size_t byte_size(const Tensor& t) { return size_t(t.numel()) * dtype_size(t.dtype()); }

// What save() and serialize() write: `head` (the 8-byte header length and the header, with a
// checksum per tensor) and then the bytes of `data`, the tensors in name order (contiguous: the
// tensor itself when it already is, else a copy; bf16 widened to f32).
struct FileParts {
  std::string head;
  std::vector<Tensor> data;
  uint64_t data_bytes = 0;
};

FileParts file_parts(const std::map<std::string, Tensor>& tensors, const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  std::map<std::string, std::string> meta;  // the caller's, minus checksums copied from another file
  for (const auto& [k, v] : metadata)
    if (!is_checksum_key(k)) meta[k] = v;
  FileParts out;
  for (auto& [name, t] : tensors) {
    QKV_CHECK(t.defined(), "safetensors::save", "tensor '", name, "' is undefined");
    // A weight held in bf16 (inference) is written widened to F32, exactly: checkpoints are fp32.
    // One held in int8 is written as the values it stands for, q * scale, in F32.
    out.data.push_back(t.dtype() == DType::bf16 ? t.to(DType::f32)
                       : is_held_int8(t)        ? dequantize_held_int8(t)
                                                : t.contiguous());
    const Tensor& w = out.data.back();
    const uint64_t pos = out.data_bytes, nb = byte_size(w);
    header[name] = {{"dtype", st_dtype(w.dtype())}, {"shape", w.shape().vec()}, {"data_offsets", {pos, pos + nb}}};
    meta[kChecksumPrefix + name] = crc32c_hex(crc32c(out.data.back().raw_data(), size_t(nb)));
    out.data_bytes += nb;
  }
  if (!meta.empty()) header["__metadata__"] = meta;
  std::string h = header.dump();
  while ((8 + h.size()) % 8) h.push_back(' ');  // the spec allows trailing spaces; aligns the buffer
  const uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out.head.push_back(char((n >> (8 * i)) & 0xff));
  out.head += h;
  return out;
}

}  // namespace

std::string serialize(const std::map<std::string, Tensor>& tensors, const std::map<std::string, std::string>& metadata) {
  const FileParts parts = file_parts(tensors, metadata);
  std::string out;
  out.reserve(parts.head.size() + parts.data_bytes);
  out += parts.head;
  for (const Tensor& c : parts.data) out.append(static_cast<const char*>(c.raw_data()), byte_size(c));
  return out;
}

// Streamed to the temporary file tensor by tensor: no second copy of the tensors in memory.
void save(const std::string& path, const std::map<std::string, Tensor>& tensors,
          const std::map<std::string, std::string>& metadata) {
  const FileParts parts = file_parts(tensors, metadata);
  AtomicWriter file(path);
  file.write(parts.head);
  for (const Tensor& c : parts.data) file.write(c.raw_data(), byte_size(c));
  file.commit();
}

}  // namespace qkv::safetensors
