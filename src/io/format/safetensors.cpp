#include "qkv/io/format/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

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
  return out;
}

Contents load(const std::string& path) { return parse(read_file(path), path); }

std::string serialize(const std::map<std::string, Tensor>& tensors, const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t pos = 0;
  for (auto& [name, t] : tensors) {
    QKV_CHECK(t.defined(), "safetensors::save", "tensor '", name, "' is undefined");
    uint64_t nb = uint64_t(t.numel()) * dtype_size(t.dtype());
    header[name] = {{"dtype", st_dtype(t.dtype())}, {"shape", t.shape().vec()}, {"data_offsets", {pos, pos + nb}}};
    pos += nb;
  }
  std::string h = header.dump();
  while ((8 + h.size()) % 8) h.push_back(' ');  // the spec allows trailing spaces; aligns the buffer
  std::string out;
  out.reserve(8 + h.size() + pos);
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out.push_back(char((n >> (8 * i)) & 0xff));
  out += h;
  for (auto& [name, t] : tensors) {
    Tensor c = t.contiguous();
    out.append(static_cast<const char*>(c.raw_data()), size_t(c.numel()) * dtype_size(c.dtype()));
  }
  return out;
}

void save(const std::string& path, const std::map<std::string, Tensor>& tensors,
          const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, serialize(tensors, metadata));
}

}  // namespace qkv::safetensors
