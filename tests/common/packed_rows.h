// A right-padded reference batch without its padding, as the packed inference paths read it
// (Bert::hidden_packed): the real tokens of every row end to end, and where each row's are.
#pragma once
#include <vector>

#include "qkv/models/bert.h"
#include "qkv/ops/shape.h"
#include "qkv/tensor/tensor.h"

namespace qkv::testing {

struct PackedRows {
  Tensor ids, types;              // (1, N) i64; types undefined when the batch has none
  std::vector<int64_t> lengths;   // real tokens of each row
  std::vector<Tensor> real(const Tensor& padded) const;  // (B, T, ...) -> each row's (n, ...) real positions
  Tensor real_concat(const Tensor& padded) const;        // those rows end to end: (N, ...)
};

// ids, types (B, T) i64 (types may be undefined), key_pad (B, T) bool/u8 with right padding only.
// The rows go through models::PackedSequences, the library's packer.
inline PackedRows pack_padded(const Tensor& ids, const Tensor& types, const Tensor& key_pad) {
  const int64_t B = ids.size(0), T = ids.size(1);
  const auto idv = ids.to_vector<int64_t>();
  const auto pad = key_pad.to(DType::u8).to_vector<uint8_t>();
  const std::vector<int64_t> tyv = types.defined() ? types.to_vector<int64_t>() : std::vector<int64_t>();
  models::PackedSequences packed;
  for (int64_t r = 0; r < B; ++r) {
    int64_t n = 0;
    while (n < T && !pad[size_t(r * T + n)]) ++n;
    const auto at = [&](const std::vector<int64_t>& v) {
      return std::vector<int64_t>(v.begin() + r * T, v.begin() + r * T + n);
    };
    packed.add(at(idv), tyv.empty() ? std::vector<int64_t>() : at(tyv));
  }
  PackedRows p;
  p.ids = packed.ids();
  if (types.defined()) p.types = packed.token_types();
  p.lengths = packed.lengths();
  return p;
}

inline std::vector<Tensor> PackedRows::real(const Tensor& padded) const {
  std::vector<Tensor> rows;
  for (size_t r = 0; r < lengths.size(); ++r)
    rows.push_back(squeeze(slice(slice(padded, 0, int64_t(r), int64_t(r) + 1), 1, 0, lengths[r]), 0));
  return rows;
}

inline Tensor PackedRows::real_concat(const Tensor& padded) const { return concat(real(padded), 0); }

}  // namespace qkv::testing
