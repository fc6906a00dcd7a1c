#include "qkv/kernels/norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "qkv/kernels/elementwise.h"
#include "qkv/kernels/parallel.h"

#include "dispatch.h"

namespace qkv::kernels {
namespace {

constexpr int64_t kMaxBlocks = 64;  // row blocks for the dweight/dbias partial sums

}  // namespace

void layer_norm_forward(const Tensor& x, const Tensor& w, const Tensor& b, double eps, Tensor& y, Tensor& mean,
                        Tensor& rstd) {
  dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    int64_t C = x.shape().back();
    int64_t rows = C ? x.numel() / C : 0;
    const T* xp = x.data<T>();
    const T* wp = w.defined() ? w.data<T>() : nullptr;
    const T* bp = b.defined() ? b.data<T>() : nullptr;
    T* yp = y.data<T>();
    T* mp = mean.data<T>();
    T* rp = rstd.data<T>();
    parallel_for_if(rows * C >= kParallelGrain && rows > 1, rows, [&](int64_t r) {
      const T* xr = xp + r * C;
      T* yr = yp + r * C;
      // Row statistics in one pass, accumulated in double and shifted by the row's first element
      // (so E[d^2] - E[d]^2 does not cancel): an f32 running sum over C terms would lose
      // ~sqrt(C) ulps, visible in outputs that cancel (x - mean) * rstd * w against b.
      double x0 = double(xr[0]), s = 0, s2 = 0;
#pragma omp simd reduction(+ : s, s2)
      for (int64_t j = 0; j < C; ++j) {
        double d = double(xr[j]) - x0;
        s += d;
        s2 += d * d;
      }
      double md = s / double(C);
      double v = std::max(0.0, s2 / double(C) - md * md);
      double mud = x0 + md;
      T mu = T(mud);
      T rs = T(1.0 / std::sqrt(v + eps));
      mp[r] = mu;
      rp[r] = rs;
      if (wp && bp) {
#pragma omp simd
        for (int64_t j = 0; j < C; ++j) yr[j] = (xr[j] - mu) * rs * wp[j] + bp[j];
      } else if (wp) {
#pragma omp simd
        for (int64_t j = 0; j < C; ++j) yr[j] = (xr[j] - mu) * rs * wp[j];
      } else if (bp) {
#pragma omp simd
        for (int64_t j = 0; j < C; ++j) yr[j] = (xr[j] - mu) * rs + bp[j];
      } else {
#pragma omp simd
        for (int64_t j = 0; j < C; ++j) yr[j] = (xr[j] - mu) * rs;
      }
    });
  });
}

void layer_norm_backward(const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd, const Tensor& gy,
                         Tensor& gx, Tensor* gw, Tensor* gb) {
  dispatch_float(x.dtype(), "layer_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    int64_t C = x.shape().back();
    int64_t rows = C ? x.numel() / C : 0;
    const T* xp = x.data<T>();
    const T* wp = w.defined() ? w.data<T>() : nullptr;
    const T* mp = mean.data<T>();
    const T* rp = rstd.data<T>();
    const T* gp = gy.data<T>();
    T* gxp = gx.data<T>();
    int64_t bs = std::max<int64_t>(1, (rows + kMaxBlocks - 1) / kMaxBlocks);
    int64_t nb = rows ? (rows + bs - 1) / bs : 0;
    std::vector<double> pw(gw ? size_t(nb * C) : 0, 0.0), pb(gb ? size_t(nb * C) : 0, 0.0);
#pragma omp parallel for schedule(static) if (rows * C >= kParallelGrain && nb > 1)
    for (int64_t blk = 0; blk < nb; ++blk) {
      double* aw = gw ? pw.data() + blk * C : nullptr;
      double* ab = gb ? pb.data() + blk * C : nullptr;
      std::vector<T> dxh(static_cast<size_t>(C));  // gy * w per row, rounded once (no FMA contraction
                                      // of the product into the subtraction below)
      for (int64_t r = blk * bs; r < std::min(rows, (blk + 1) * bs); ++r) {
        const T* xr = xp + r * C;
        const T* gr = gp + r * C;
        T* o = gxp + r * C;
        T mu = mp[r], rs = rp[r];
        T* d = dxh.data();
        // dxhat = gy * w;  dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
        double s1 = 0, s2 = 0;
#pragma omp simd reduction(+ : s1, s2)
        for (int64_t j = 0; j < C; ++j) {
          d[j] = wp ? gr[j] * wp[j] : gr[j];
          s1 += double(d[j]);
          s2 += double(d[j]) * double((xr[j] - mu) * rs);
        }
        T m1 = T(s1 / double(C)), m2 = T(s2 / double(C));
#pragma omp simd
        for (int64_t j = 0; j < C; ++j) {
          T xh = (xr[j] - mu) * rs;
          o[j] = rs * ((d[j] - m1) - xh * m2);
        }
        if (aw) {
#pragma omp simd
          for (int64_t j = 0; j < C; ++j) aw[j] += double(gr[j]) * double((xr[j] - mu) * rs);
        }
        if (ab) {
#pragma omp simd
          for (int64_t j = 0; j < C; ++j) ab[j] += double(gr[j]);
        }
      }
    }
    // dweight = sum_rows gy * xhat, dbias = sum_rows gy: block partials in block order.
    for (int which = 0; which < 2; ++which) {
      Tensor* dst = which ? gb : gw;
      if (!dst) continue;
      const std::vector<double>& part = which ? pb : pw;
      T* d = dst->data<T>();
      for (int64_t j = 0; j < C; ++j) {
        double acc = 0;
        for (int64_t blk = 0; blk < nb; ++blk) acc += part[size_t(blk * C + j)];
        d[j] = T(acc);
      }
    }
  });
}

}  // namespace qkv::kernels
