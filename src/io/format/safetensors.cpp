#include "qkv/io/format/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

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

// Checks each tensor's bytes against the CRC-32C that qkv recorded in __metadata__ when it wrote
// the file, and removes those entries from the metadata callers see. Files written elsewhere have
// none and are accepted as they are; a file with some has one for every tensor.
void verify_checksums(Contents& out, const std::map<std::string, std::pair<const char*, uint64_t>>& bytes,
                      const std::string& src) {
  std::map<std::string, std::string> recorded;  // tensor name -> hex
  for (auto it = out.metadata.begin(); it != out.metadata.end();) {
    if (!is_checksum_key(it->first)) { ++it; continue; }
    recorded[it->first.substr(std::strlen(kChecksumPrefix))] = it->second;
    it = out.metadata.erase(it);
  }
  if (recorded.empty()) return;
  for (const auto& [name, hex] : recorded)
    QKV_CHECK(bytes.count(name), src, "__metadata__ records a checksum (", kChecksumPrefix, name,
              ") for a tensor the file does not hold (header corrupted?)");
  for (const auto& [name, span] : bytes) {
    const std::string where = src + ": tensor '" + name + "'";
    auto it = recorded.find(name);
    QKV_CHECK(it != recorded.end(), where, "has no checksum in __metadata__ although the file records them (expected ",
              kChecksumPrefix, name, "; header corrupted?)");
    bool ok = false;
    const uint32_t expected = parse_hex32(it->second, ok);
    QKV_CHECK(ok, where, "__metadata__.", kChecksumPrefix, name, " must be 8 lowercase hex digits, got '", it->second,
              "'");
    const uint32_t found = crc32c(span.first, span.second);
    QKV_CHECK(found == expected, where, "corrupted data: CRC-32C of its ", span.second, " bytes is ", crc32c_hex(found),
              ", the file recorded ", it->second);
  }
  out.checksummed = true;
}

}  // namespace

Contents parse(const std::string& bytes, const std::string& src) {
  QKV_CHECK(bytes.size() >= 8, src, "truncated safetensors file: ", bytes.size(), " bytes, need at least 8 for the header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  QKV_CHECK(n <= bytes.size() - 8, src, "header length ", n, " runs past the end of the file (", bytes.size(), " bytes)");
  json header;
  try {
    header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + int64_t(n));
  } catch (const json::exception& e) {
    fail(src, "header is not valid JSON: ", e.what());
  }
  QKV_CHECK(header.is_object(), src, "header must be a JSON object");
  const size_t buf_size = bytes.size() - 8 - size_t(n);
  const char* buf = bytes.data() + 8 + n;

  Contents out;
  struct Span { uint64_t begin, end; std::string name; };
  std::vector<Span> spans;
  std::map<std::string, std::pair<const char*, uint64_t>> tensor_bytes;  // name -> (data, size)
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
    DType dt;
    std::string dts = entry["dtype"].get<std::string>();
    QKV_CHECK(parse_dtype(dts, dt), where, "unsupported dtype '", dts, "' (expected F32, F64, I32, I64, U8 or BOOL)");
    QKV_CHECK(entry["shape"].is_array() && entry["shape"].size() <= size_t(kMaxDims), where,
              "shape must be an array of at most ", kMaxDims, " extents");
    std::vector<int64_t> dims;
    uint64_t numel = 1;
    for (auto& d : entry["shape"]) {
      QKV_CHECK(d.is_number_unsigned() || (d.is_number_integer() && d.get<int64_t>() >= 0), where,
                "shape extents must be non-negative integers");
      uint64_t v = d.get<uint64_t>();
      QKV_CHECK(v < (uint64_t(1) << 40) && (v == 0 || numel <= (uint64_t(1) << 40) / v), where, "shape too large");
      numel *= v;
      dims.push_back(int64_t(v));
    }
    auto& off = entry["data_offsets"];
    QKV_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned(), where,
              "data_offsets must be [begin, end]");
    uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    QKV_CHECK(b <= e && e <= buf_size, where, "data_offsets [", b, ", ", e, "] outside the data buffer of ", buf_size,
              " bytes (file truncated?)");
    QKV_CHECK(e - b == numel * dtype_size(dt), where, "data_offsets span ", e - b, " bytes but ", dts, " shape ",
              Shape(dims).str(), " needs ", numel * dtype_size(dt));
    spans.push_back({b, e, name});
    tensor_bytes[name] = {buf + b, e - b};
    out.tensors[name] = Tensor::from_data(buf + b, Shape(dims), dt);
  }
  std::sort(spans.begin(), spans.end(), [](const Span& x, const Span& y) { return x.begin < y.begin; });
  uint64_t pos = 0;
  for (const Span& s : spans) {
    QKV_CHECK(s.begin >= pos, src, "tensor '", s.name, "' overlaps the previous tensor (offset ", s.begin, " < ", pos, ")");
    QKV_CHECK(s.begin == pos, src, "hole in the data buffer before tensor '", s.name, "' (bytes ", pos, "..", s.begin, ")");
    pos = s.end;
  }
  QKV_CHECK(pos == buf_size, src, "data buffer has ", buf_size - pos, " trailing bytes that no tensor covers");
  verify_checksums(out, tensor_bytes, src);
  return out;
}

Contents load(const std::string& path) { return parse(read_file(path), path); }

std::string serialize(const std::map<std::string, Tensor>& tensors, const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  std::map<std::string, std::string> meta;  // the caller's, minus checksums copied from another file
  for (const auto& [k, v] : metadata)
    if (!is_checksum_key(k)) meta[k] = v;
  std::vector<Tensor> contiguous;  // in name order, as written
  uint64_t pos = 0;
  for (auto& [name, t] : tensors) {
    QKV_CHECK(t.defined(), "safetensors::save", "tensor '", name, "' is undefined");
    contiguous.push_back(t.contiguous());
    uint64_t nb = uint64_t(t.numel()) * dtype_size(t.dtype());
    header[name] = {{"dtype", st_dtype(t.dtype())}, {"shape", t.shape().vec()}, {"data_offsets", {pos, pos + nb}}};
    meta[kChecksumPrefix + name] = crc32c_hex(crc32c(contiguous.back().raw_data(), size_t(nb)));
    pos += nb;
  }
  if (!meta.empty()) header["__metadata__"] = meta;
  std::string h = header.dump();
  while ((8 + h.size()) % 8) h.push_back(' ');  // the spec allows trailing spaces; aligns the buffer
  std::string out;
  out.reserve(8 + h.size() + pos);
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out.push_back(char((n >> (8 * i)) & 0xff));
  out += h;
  for (const Tensor& c : contiguous)
    out.append(static_cast<const char*>(c.raw_data()), size_t(c.numel()) * dtype_size(c.dtype()));
  return out;
}

void save(const std::string& path, const std::map<std::string, Tensor>& tensors,
          const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, serialize(tensors, metadata));
}

}  // namespace qkv::safetensors
