#include "qkv/attention/decode_attention.h"

#include "qkv/kernels/attention.h"

namespace qkv {

bool decode_kv_layout_ok(const Tensor& k, const Tensor& v) {
  return k.defined() && v.defined() && k.ndim() == 4 && k.dtype() == DType::f32 && v.dtype() == DType::f32 &&
         v.shape() == k.shape() && v.strides() == k.strides() && k.strides()[3] == 1 && k.strides()[2] == k.size(3);
}

Tensor attention_decode(const Tensor& q, const Tensor& k, const Tensor& v, const DecodeRows& rows, double scale) {
  constexpr const char* op = "attention_decode";
  QKV_CHECK(q.defined() && q.ndim() == 4 && q.size(1) == 1 && q.dtype() == DType::f32, op,
            "q must be (B, 1, H, Dh) f32, got ", q.defined() ? q.str() : std::string("undefined"));
  const int64_t B = q.size(0), H = q.size(2), Dh = q.size(3);
  QKV_CHECK(q.strides()[3] == 1 && q.strides()[2] == Dh, op, "q's heads must be contiguous in a row (strides (*, *, ",
            Dh, ", 1)), got strides ", q.strides().str());
  QKV_CHECK(decode_kv_layout_ok(k, v), op, "k and v must be (P, L, H, Dh) f32 of one shape and strides with (*, *, Dh, 1) strides, got k ",
            k.defined() ? k.str() : std::string("undefined"), " strides ", k.defined() ? k.strides().str() : "-", ", v ",
            v.defined() ? v.str() : std::string("undefined"), " strides ", v.defined() ? v.strides().str() : "-");
  const int64_t P = k.size(0), L = k.size(1);
  QKV_CHECK(k.size(2) == H && k.size(3) == Dh, op, "k holds (", k.size(2), ", ", k.size(3), ") heads x head_dim, q (",
            H, ", ", Dh, ")");
  QKV_CHECK(rows.table.empty() || rows.map.empty(), op, "give a row table or a row map, not both");
  if (!rows.table.empty()) {
    QKV_CHECK(rows.table_ld >= L && int64_t(rows.table.size()) == B * rows.table_ld, op, "row table: expected (", B,
              ", >= ", L, ") entries, got ", rows.table.size(), " with leading dimension ", rows.table_ld);
    for (int64_t r = 0; r < B; ++r)
      for (int64_t j = 0; j < L; ++j) {
        const int32_t s = rows.table[size_t(r * rows.table_ld + j)];
        QKV_CHECK(s >= 0 && s < P, op, "row table: row ", r, " position ", j, " reads storage row ", s, " of ", P);
      }
  } else if (!rows.map.empty()) {
    QKV_CHECK(int64_t(rows.map.size()) == B, op, "row map: expected ", B, " entries, got ", rows.map.size());
    for (int64_t r = 0; r < B; ++r)
      QKV_CHECK(rows.map[size_t(r)] >= 0 && rows.map[size_t(r)] < P, op, "row map: row ", r, " reads storage row ",
                rows.map[size_t(r)], " of ", P);
  } else {
    QKV_CHECK(P == B, op, "without a row table or map, k must hold one row per query: ", B, " queries, ", P, " rows");
  }
  if (!rows.key_padding.empty())
    QKV_CHECK(rows.key_padding_ld >= L && int64_t(rows.key_padding.size()) == B * rows.key_padding_ld, op,
              "key padding: expected (", B, ", >= ", L, ") entries, got ", rows.key_padding.size(),
              " with leading dimension ", rows.key_padding_ld);

  Tensor out = Tensor::empty({B, 1, H * Dh});  // (B, 1, H * Dh)
  kernels::DecodeAttention a;
  a.q = q.data<float>();
  a.q_row_stride = q.strides()[0];
  a.k = k.data<float>();
  a.v = v.data<float>();
  a.row_stride = k.strides()[0];
  a.pos_stride = k.strides()[1];
  a.table = rows.table.empty() ? nullptr : rows.table.data();
  a.table_ld = rows.table_ld;
  a.row_map = rows.map.empty() ? nullptr : rows.map.data();
  a.key_padding = rows.key_padding.empty() ? nullptr : rows.key_padding.data();
  a.key_padding_ld = rows.key_padding_ld;
  a.out = out.data<float>();
  a.out_row_stride = H * Dh;
  a.rows = B;
  a.heads = H;
  a.head_dim = Dh;
  a.length = L;
  a.scale = float(scale);
  kernels::attention_decode(a);
  return out;
}

}  // namespace qkv
