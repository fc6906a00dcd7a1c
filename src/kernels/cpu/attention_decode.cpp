// Single-query attention for incremental decoding (see kernels/attention.h, attention_decode):
// one new query per (row, head) over L cached keys. No Q K^T tile, no BLAS call: for each
// (row, head) a pass of L dot products of length Dh, a vexp softmax over L scores and an
// L-term weighted sum of value rows, all in registers / L1. Rows reach their keys through a
// physical-row map (per row, or per row and position), so beam search never moves cached keys.
#include <omp.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "qkv/kernels/attention.h"
#include "qkv/kernels/softmax.h"

namespace qkv::kernels {

void attention_decode(const DecodeAttention& a) {
  const int64_t R = a.rows, H = a.heads, Dh = a.head_dim, L = a.length, D = H * Dh;
  if (R == 0 || H == 0) return;
  const float scale = a.scale;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  // Multiply-adds per call; small calls stay on one thread (waking the pool costs more).
  const bool parallel = R * L * D * 2 >= (int64_t(1) << 17);
#pragma omp parallel if (parallel)
  {
    // Scores of one row, (H, L). A row's heads are handled together, so each cached position
    // is read as one contiguous run of H * Dh floats.
    std::vector<float> s(static_cast<size_t>(std::max<int64_t>(H * L, 1))), inv(static_cast<size_t>(H));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < R; ++r) {
      const float* q = a.q + r * a.q_row_stride;
      float* o = a.out + r * a.out_row_stride;
      const int32_t* table = a.table ? a.table + r * a.table_ld : nullptr;
      const int64_t fixed = a.row_map ? a.row_map[r] : r;
      const uint8_t* pad = a.key_padding ? a.key_padding + r * a.key_padding_ld : nullptr;
      auto at = [&](const float* base, int64_t j) {
        return base + (table ? int64_t(table[j]) : fixed) * a.row_stride + j * a.pos_stride;
      };
      // s[h, j] = scale * q_h . k_{j,h}  (masked: -inf)
      for (int64_t j = 0; j < L; ++j) {
        if (pad && pad[j]) {
          for (int64_t h = 0; h < H; ++h) s[size_t(h * L + j)] = kNegInf;
          continue;
        }
        const float* k = at(a.k, j);
        for (int64_t h = 0; h < H; ++h) {
          const float* qh = q + h * Dh;
          const float* kh = k + h * Dh;
          float dot = 0.f;
#pragma omp simd reduction(+ : dot)
          for (int64_t d = 0; d < Dh; ++d) dot += qh[d] * kh[d];
          s[size_t(h * L + j)] = dot * scale;
        }
      }
      // Softmax over j per head; a fully masked head gets weights 0 (out = 0).
      for (int64_t h = 0; h < H; ++h) {
        float* sh = s.data() + h * L;
        float mx = kNegInf;
        for (int64_t j = 0; j < L; ++j) mx = std::max(mx, sh[j]);
        if (mx == kNegInf) {
          std::fill(sh, sh + L, 0.f);
          inv[size_t(h)] = 0.f;
          continue;
        }
        float sum = 0.f;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < L; ++j) {
          const float e = vexp(sh[j] - mx);
          sh[j] = e;
          sum += e;
        }
        inv[size_t(h)] = 1.f / sum;
      }
      // o_h = sum_j p_{h,j} v_{j,h}
      std::fill(o, o + D, 0.f);
      for (int64_t j = 0; j < L; ++j) {
        if (pad && pad[j]) continue;
        const float* v = at(a.v, j);
        for (int64_t h = 0; h < H; ++h) {
          const float p = s[size_t(h * L + j)] * inv[size_t(h)];
          float* oh = o + h * Dh;
          const float* vh = v + h * Dh;
#pragma omp simd
          for (int64_t d = 0; d < Dh; ++d) oh[d] += p * vh[d];
        }
      }
    }
  }
}

}  // namespace qkv::kernels
