#include "qkv/tensor/held_int8.h"

#include <cstring>

#include "qkv/util/error.h"

namespace qkv {
namespace {

constexpr uint64_t kMagic = 0x38746e69646c6568ull;  // "heldint8"
constexpr int64_t kHeader = 64;

struct Header {
  uint64_t magic;
  int64_t rows, K;
};

int64_t round64(int64_t n) { return (n + 63) / 64 * 64; }

HeldInt8Rows parts(const Storage& s, const char* who) {
  Header h{};
  QKV_CHECK(s.nbytes() >= size_t(kHeader), who, "not a weight held in int8 (a storage of ", s.nbytes(), " bytes)");
  std::memcpy(&h, s.data(), sizeof h);
  QKV_CHECK(h.magic == kMagic, who, "not a weight held in int8 (its storage has no held-int8 header)");
  auto* base = static_cast<uint8_t*>(s.data());
  const int64_t q_bytes = round64(h.rows * h.K);
  HeldInt8Rows r;
  r.q = reinterpret_cast<int8_t*>(base + kHeader);
  r.scale = reinterpret_cast<float*>(base + kHeader + q_bytes);
  r.zero_point_sum = reinterpret_cast<int32_t*>(base + kHeader + q_bytes + round64(h.rows * 4));
  r.rows = h.rows, r.K = h.K;
  return r;
}

}  // namespace

std::shared_ptr<Storage> held_int8_storage(int64_t rows, int64_t K) {
  QKV_CHECK(rows > 0 && K > 0, "held_int8_storage", "expected rows and K > 0, got ", rows, " x ", K);
  const int64_t bytes = kHeader + round64(rows * K) + 2 * round64(rows * 4);
  std::shared_ptr<Storage> s = Storage::allocate_apart(size_t(bytes));
  std::memset(s->data(), 0, size_t(bytes));
  const Header h{kMagic, rows, K};
  std::memcpy(s->data(), &h, sizeof h);
  return s;
}

Tensor held_int8_tensor(const std::shared_ptr<Storage>& storage, int64_t first, int64_t n) {
  const HeldInt8Rows all = parts(*storage, "held_int8_tensor");
  QKV_CHECK(first >= 0 && n > 0 && first + n <= all.rows, "held_int8_tensor", "rows [", first, ", ", first + n,
            ") are outside the storage's ", all.rows);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = storage;
  impl->offset = kHeader + first * all.K;
  impl->shape = Shape{n, all.K};
  impl->strides = Shape::contiguous_strides(impl->shape);
  impl->dtype = DType::i8;
  return Tensor(impl);
}

HeldInt8Rows held_int8_rows(const Tensor& w, const char* who) {
  QKV_CHECK(is_held_int8(w) && w.ndim() == 2 && w.is_contiguous(), who,
            "expected a weight held in int8 ((N, K) i8, contiguous), got ",
            w.defined() ? w.str() : std::string("undefined"));
  HeldInt8Rows r = parts(*w.storage(), who);
  const int64_t first = (w.offset() - kHeader) / r.K;
  QKV_CHECK(w.size(1) == r.K && (w.offset() - kHeader) % r.K == 0 && first + w.size(0) <= r.rows, who,
            "a held int8 tensor ", w.str(), " that does not lie on its storage's rows");
  r.q += first * r.K;
  r.scale += first;
  r.zero_point_sum += first;
  r.rows = w.size(0);
  return r;
}

void copy_held_int8(const Tensor& dst, const Tensor& src) {
  const HeldInt8Rows d = held_int8_rows(dst, "copy_held_int8"), s = held_int8_rows(src, "copy_held_int8");
  QKV_CHECK(d.rows == s.rows && d.K == s.K, "copy_held_int8", "shape ", src.shape().str(), " into ",
            dst.shape().str());
  std::memcpy(d.q, s.q, size_t(d.rows * d.K));
  std::memcpy(d.scale, s.scale, size_t(d.rows) * sizeof(float));
  std::memcpy(d.zero_point_sum, s.zero_point_sum, size_t(d.rows) * sizeof(int32_t));
  dst.mark_modified();
}

Tensor dequantize_held_int8(const Tensor& w) {
  const HeldInt8Rows r = held_int8_rows(w, "dequantize_held_int8");
  Tensor out = Tensor::empty({r.rows, r.K});
  float* o = out.data<float>();
  for (int64_t n = 0; n < r.rows; ++n)
    for (int64_t k = 0; k < r.K; ++k) o[n * r.K + k] = float(r.q[n * r.K + k]) * r.scale[n];
  return out;
}

}  // namespace qkv
