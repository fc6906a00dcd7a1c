// Fused optimizer loops (qkv/kernels/optim.h). Each loop body restates the torch 1.13 line it
// mirrors; the per-step scalars are computed in double and rounded to T once, as ATen does.
// Built with -fno-math-errno (CMakeLists.txt): then GCC vectorises sqrt (vsqrtps/vsqrtpd,
// correctly rounded like the scalar sqrt); Adam only takes roots of non-negative values.
#include "qkv/kernels/optim.h"

#include <algorithm>
#include <cmath>
#include <omp.h>
#include <type_traits>
#include <vector>

#include "qkv/kernels/elementwise.h"

#include "dispatch.h"

namespace qkv::kernels {
namespace {

// Adam's per-step scalars, in double (rounded to T inside the loop).
struct AdamConsts {
  double b1, one_m_b1, b2, one_m_b2, wd, decay, neg_step, bc2s, eps;
};

// One contiguous chunk [lo, hi), vectorised (see the -fno-math-errno note at the top). The
// options are template parameters so that each variant is one branch-free loop.
template <typename T, bool L2, bool Decoupled, bool Amsgrad>
void adam_chunk(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, T* __restrict vmax,
                int64_t lo, int64_t hi, const AdamConsts& k) {
  const T b1 = T(k.b1), one_m_b1 = T(k.one_m_b1), b2 = T(k.b2), one_m_b2 = T(k.one_m_b2), wd = T(k.wd);
  const T decay = T(k.decay), neg_step = T(k.neg_step), bc2s = T(k.bc2s), eps = T(k.eps);
#pragma omp simd
  for (int64_t i = lo; i < hi; ++i) {
    T pi = p[i], gi = g[i];
    if constexpr (L2) gi = gi + wd * pi;         // grad = grad.add(param, alpha=wd)
    if constexpr (Decoupled) pi = pi * decay;    // param.mul_(1 - lr * wd)
    T mi = m[i] * b1;                            // exp_avg.mul_(beta1)
    mi = mi + one_m_b1 * gi;                     //        .add_(grad, alpha=1 - beta1)
    T vi = v[i] * b2;                            // exp_avg_sq.mul_(beta2)
    vi = vi + one_m_b2 * (gi * gi);              //           .addcmul_(grad, grad, value=1 - beta2)
    T vd = vi;
    if constexpr (Amsgrad) {                     // max_exp_avg_sq = maximum(max_exp_avg_sq, exp_avg_sq)
      vd = vmax[i] > vi ? vmax[i] : vi;
      vmax[i] = vd;
    }
    T denom = std::sqrt(vd) / bc2s + eps;        // (v.sqrt() / bc2_sqrt).add_(eps)
    p[i] = pi + neg_step * (mi / denom);         // param.addcdiv_(exp_avg, denom, value=-step_size)
    m[i] = mi;
    v[i] = vi;
  }
}

// Thread t's chunk [lo, hi) of [0, n) among nt (possibly empty). Chunks start at multiples of 64
// elements, so an element takes the same (vector or scalar-tail) code path whatever the thread
// count, and the result is bit-identical across thread counts.
void chunk_of(int64_t n, int64_t t, int64_t nt, int64_t* lo, int64_t* hi) {
  const int64_t per = ((n + nt - 1) / nt + 63) / 64 * 64;
  *lo = std::min(n, t * per);
  *hi = std::min(n, *lo + per);
}

// Static partition of [0, n) over the OpenMP threads by chunk_of (serial below kParallelGrain).
template <typename Body>
void parallel_chunks(int64_t n, Body&& body) {
  if (n < kParallelGrain) {
    body(int64_t(0), n);
    return;
  }
#pragma omp parallel
  {
    int64_t lo, hi;
    chunk_of(n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
    if (lo < hi) body(lo, hi);
  }
}

// Calls fn(std::bool_constant<b>) so a runtime flag picks a template instance.
template <typename Fn>
void with_flag(bool b, Fn&& fn) {
  if (b) fn(std::true_type{});
  else fn(std::false_type{});
}

AdamConsts adam_consts(const AdamStep& h) {
  AdamConsts k;
  k.b1 = h.beta1;
  k.one_m_b1 = 1.0 - h.beta1;
  k.b2 = h.beta2;
  k.one_m_b2 = 1.0 - h.beta2;
  k.wd = h.weight_decay;
  k.decay = 1.0 - h.lr * h.weight_decay;                                  // AdamW: param.mul_(1 - lr * wd)
  k.neg_step = -(h.lr / (1.0 - std::pow(h.beta1, double(h.step))));      // addcdiv_ value = -lr / bc1
  k.bc2s = std::sqrt(1.0 - std::pow(h.beta2, double(h.step)));
  k.eps = h.eps;
  return k;
}

// One parameter's update: its loop (the template instance for its dtype and options), constants and size.
struct AdamPlan {
  void (*chunk)(const AdamUpdate&, int64_t, int64_t, const AdamConsts&);
  AdamConsts k;
  int64_t n;
};

template <typename T, bool L2, bool Decoupled, bool Amsgrad>
void adam_chunk_of(const AdamUpdate& u, int64_t lo, int64_t hi, const AdamConsts& k) {
  adam_chunk<T, L2, Decoupled, Amsgrad>(u.p->data<T>(), u.g->data<T>(), u.m->data<T>(), u.v->data<T>(),
                                        Amsgrad ? u.vmax->data<T>() : nullptr, lo, hi, k);
}

AdamPlan adam_plan(const AdamUpdate& u) {
  AdamPlan plan{nullptr, adam_consts(u.h), u.p->numel()};
  const AdamStep& h = u.h;
  dispatch_float(u.p->dtype(), "adam_update", [&](auto tag) {
    using T = decltype(tag);
    const bool l2 = !h.decoupled && h.weight_decay != 0, dec = h.decoupled && h.weight_decay != 0;
    with_flag(l2, [&](auto L2) {
      with_flag(dec, [&](auto Dec) {
        with_flag(h.amsgrad, [&](auto Ams) { plan.chunk = &adam_chunk_of<T, L2(), Dec(), Ams()>; });
      });
    });
  });
  return plan;
}

template <typename T, bool Decay, bool Momentum, bool First, bool Nesterov>
void sgd_loop(T* __restrict p, const T* __restrict g, T* __restrict buf, int64_t n, const SgdStep& h) {
  const T wd = T(h.weight_decay), mom = T(h.momentum), one_m_damp = T(1.0 - h.dampening);
  const T neg_lr = T(-h.lr);
  parallel_chunks(n, [&](int64_t lo, int64_t hi) {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) {
      T pi = p[i];
      T d = g[i];
      if constexpr (Decay) d = d + wd * pi;            // d_p = d_p.add(param, alpha=wd)
      if constexpr (Momentum) {
        T b;
        if constexpr (First) b = d;                    // buf = clone(d_p)
        else b = buf[i] * mom + one_m_damp * d;        // buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
        buf[i] = b;
        if constexpr (Nesterov) d = d + mom * b;       // d_p = d_p.add(buf, alpha=momentum)
        else d = b;                                    // d_p = buf
      }
      p[i] = pi + neg_lr * d;                          // param.add_(d_p, alpha=-lr)
    }
  });
}

}  // namespace

void adam_update_all(const std::vector<AdamUpdate>& updates) {
  std::vector<AdamPlan> plans;
  plans.reserve(updates.size());
  bool any_large = false;
  for (const AdamUpdate& u : updates) {
    plans.push_back(adam_plan(u));
    any_large = any_large || plans.back().n >= kParallelGrain;
  }
  // Each parameter at or above kParallelGrain is split as parallel_chunks splits it; a smaller one is
  // updated whole by one thread (dealt round the threads). The same chunks as one update at a time.
#pragma omp parallel if (any_large)
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    int64_t small = 0;
    for (size_t i = 0; i < plans.size(); ++i) {
      const AdamPlan& a = plans[i];
      if (a.n < kParallelGrain) {
        if (small++ % nt == t) a.chunk(updates[i], 0, a.n, a.k);
        continue;
      }
      int64_t lo, hi;
      chunk_of(a.n, t, nt, &lo, &hi);
      if (lo < hi) a.chunk(updates[i], lo, hi, a.k);
    }
  }
  for (const AdamUpdate& u : updates) u.p->mark_modified();  // packed copies of p (ops/packed.h) are stale now
}

void adam_update(Tensor& p, const Tensor& g, Tensor& m, Tensor& v, Tensor* vmax, const AdamStep& h) {
  adam_update_all({AdamUpdate{&p, &g, &m, &v, vmax, h}});
}

void sgd_update(Tensor& p, const Tensor& g, Tensor& buf, const SgdStep& h) {
  dispatch_float(p.dtype(), "sgd_update", [&](auto tag) {
    using T = decltype(tag);
    T* b = h.momentum != 0 ? buf.data<T>() : nullptr;
    with_flag(h.weight_decay != 0, [&](auto Decay) {
      with_flag(h.momentum != 0, [&](auto Mom) {
        with_flag(h.first, [&](auto First) {
          with_flag(h.nesterov, [&](auto Nest) {
            sgd_loop<T, Decay(), Mom(), First(), Nest()>(p.data<T>(), g.data<T>(), b, p.numel(), h);
          });
        });
      });
    });
  });
  p.mark_modified();
}

double sum_squares_deterministic(const Tensor& x_in) {
  Tensor x = x_in.contiguous();
  double total = 0;
  dispatch_float(x.dtype(), "sum_squares", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    const int64_t n = x.numel(), nb = (n + kSumBlock - 1) / kSumBlock;
    std::vector<double> partial(size_t(nb), 0.0);
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t lo = b * kSumBlock, hi = std::min(n, lo + kSumBlock);
      double s = 0;
      for (int64_t i = lo; i < hi; ++i) s += double(px[i]) * double(px[i]);
      partial[size_t(b)] = s;
    }
    for (double s : partial) total += s;
  });
  return total;
}

}  // namespace qkv::kernels
