// bf16 copies of a training step's weights (kernels/bf16_step_weights.h): the scope's registry
// and the GEMM front-end's lookup.
#include "qkv/kernels/bf16_step_weights.h"

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "qkv/kernels/bf16.h"
#include "qkv/kernels/gemm.h"
#include "qkv/util/error.h"

namespace qkv::kernels {

struct Bf16StepWeights::State {
  struct Weight {
    Tensor keep;                 // the parameter (its storage outlives the copies' use)
    int64_t rows = 0, cols = 0;  // (out, in)
  };
  std::unordered_map<const float*, Weight> weights;  // keyed by the first element; fixed after construction
  std::unordered_map<const float*, Weight> adopted;  // adopt()'s, the same way (under g_mu)
  uint64_t number = 0;                                // this scope's, unique in the process
  int64_t made = 0;                                   // copies refilled in this scope (under the mutex below)
};

namespace {

std::atomic<Bf16StepWeights::State*> g_active{nullptr};

// The copies' storage, kept from step to step (a step refills it rather than allocating ~2 bytes
// per parameter and role again, page faults included): keyed by the weight's first element and
// role, with the scope that last refilled it. The entries the last scope did not use are dropped
// when it ends.
struct Copy {
  std::shared_ptr<Bf16Weight> w;
  int64_t rows, cols;
  uint64_t scope;  // the scope whose values it holds
};
struct CopyKey {
  const float* p;
  bool kn;
  bool operator==(const CopyKey& o) const { return p == o.p && kn == o.kn; }
};
struct CopyKeyHash {
  size_t operator()(const CopyKey& k) const { return std::hash<const void*>()(k.p) ^ size_t(k.kn); }
};
std::mutex g_mu;  // guards g_copies, g_scopes and State::made
std::unordered_map<CopyKey, Copy, CopyKeyHash> g_copies;
uint64_t g_scopes = 0;  // scope numbers handed out

// Refills, in one parallel region, the kept copies of this scope's weights (those an earlier step
// used): the step would refill each at its first product anyway, one parallel region per copy, and
// a region's start costs ~50 us where idle threads sleep (OMP_WAIT_POLICY=PASSIVE on a VM). Called
// by the scope's constructor once it is the active one, before any product.
void refill_kept_copies(Bf16StepWeights::State& st) {
  struct Job {
    Copy* c;
    const float* src;
  };
  std::vector<Job> jobs;
  const std::lock_guard<std::mutex> lock(g_mu);  // held throughout: no product runs before the constructor returns
  for (auto& [key, c] : g_copies) {
    auto it = st.weights.find(key.p);
    if (it != st.weights.end() && c.w && c.rows == it->second.rows && c.cols == it->second.cols)
      jobs.push_back({&c, key.p});
  }
  std::vector<std::exception_ptr> failed(jobs.size());  // an exception must not leave the parallel loop
#pragma omp parallel for schedule(dynamic) if (jobs.size() > 1)
  for (size_t i = 0; i < jobs.size(); ++i) {
    try {
      refill_bf16_weight(*jobs[i].c->w, jobs[i].src, jobs[i].c->cols);
    } catch (...) {
      failed[i] = std::current_exception();
    }
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (failed[i]) std::rethrow_exception(failed[i]);  // that copy keeps its old scope: refilled at its first use
    jobs[i].c->scope = st.number;
    ++st.made;
  }
}

}  // namespace

Bf16StepWeights::Bf16StepWeights(const std::vector<Tensor>& params) : state_(new State) {
  for (const Tensor& p : params)
    if (p.defined() && p.ndim() == 2 && p.dtype() == DType::f32 && p.is_contiguous() && p.numel() > 0)
      state_->weights.emplace(p.data<float>(), State::Weight{p, p.size(0), p.size(1)});
  {  // numbered before it is visible: no product can take an earlier step's values as current
    const std::lock_guard<std::mutex> lock(g_mu);
    state_->number = ++g_scopes;
  }
  State* none = nullptr;
  if (!g_active.compare_exchange_strong(none, state_, std::memory_order_acq_rel)) {
    delete state_;
    fail("Bf16StepWeights", "another step's weight copies are in use: one scope at a time");
  }
  try {
    refill_kept_copies(*state_);
  } catch (...) {
    g_active.store(nullptr, std::memory_order_release);
    delete state_;
    throw;
  }
}

Bf16StepWeights::~Bf16StepWeights() {
  g_active.store(nullptr, std::memory_order_release);
  {
    const std::lock_guard<std::mutex> lock(g_mu);
    for (auto it = g_copies.begin(); it != g_copies.end();)
      it = it->second.scope == state_->number ? std::next(it) : g_copies.erase(it);
  }
  delete state_;
}

int64_t Bf16StepWeights::copies_made() const {
  const std::lock_guard<std::mutex> lock(g_mu);
  return state_->made;
}

void Bf16StepWeights::adopt(const Tensor& w) {
  QKV_CHECK(w.defined() && w.ndim() == 2 && w.dtype() == DType::f32 && w.is_contiguous(), "Bf16StepWeights::adopt",
            "expected a contiguous f32 (rows, cols) matrix, got ", w.defined() ? w.str() : std::string("undefined"));
  State* st = g_active.load(std::memory_order_acquire);
  if (st == nullptr || w.numel() == 0 || st->weights.count(w.data<float>())) return;
  const std::lock_guard<std::mutex> lock(g_mu);
  st->adopted.insert_or_assign(w.data<float>(), State::Weight{w, w.size(0), w.size(1)});
}

bool gemm_bf16_step_weight(bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                           int64_t ldb, float* C, int64_t ldc, const float* bias) {
  Bf16StepWeights::State* st = g_active.load(std::memory_order_acquire);
  if (st == nullptr || M <= 0 || bf16_products() != Bf16Products::native) return false;
  Bf16StepWeights::State::Weight w;
  if (auto it = st->weights.find(B); it != st->weights.end()) {
    w = it->second;
  } else {
    const std::lock_guard<std::mutex> lock(g_mu);
    auto at = st->adopted.find(B);
    if (at == st->adopted.end()) return false;
    w = at->second;
  }
  // tb: B = W^T, the view of W (N, K); otherwise B = W itself, (K, N). Only the whole matrix.
  const bool whole = tb ? (w.rows == N && w.cols == K && ldb == K) : (w.rows == K && w.cols == N && ldb == N);
  if (!whole) return false;
  std::shared_ptr<Bf16Weight> copy;
  {
    const std::lock_guard<std::mutex> lock(g_mu);
    Copy& c = g_copies[CopyKey{B, !tb}];
    if (!c.w || c.rows != w.rows || c.cols != w.cols) {  // new, or another tensor now lives here
      c.w = make_bf16_weight(N, K, !tb, M);
      c.rows = w.rows, c.cols = w.cols, c.scope = 0;
    }
    if (c.scope != st->number) {
      refill_bf16_weight(*c.w, B, ldb);
      c.scope = st->number;
      ++st->made;
    }
    copy = c.w;
  }
  return try_gemm_bf16_packed(M, A, lda, *copy, bias, C, ldc);
}

namespace {
thread_local Bf16RoundedOperand* t_operand = nullptr;  // the innermost live one on this thread
// The thread's buffer, lent to one live operand at a time and returned: a step's largest dY (the
// vocabulary projection's, tens of MB) would otherwise be allocated, and faulted in, at every step.
thread_local Bf16RoundedOperand::Bits t_spare;

// bits (swapped with the thread's spare) with room for n values, their contents unspecified.
void take_spare(Bf16RoundedOperand::Bits& bits, int64_t n) {
  std::swap(bits, t_spare);
  if (bits.capacity < size_t(n)) {
    const size_t bytes = size_t(n) * sizeof(uint16_t);
    bits.data = {static_cast<uint16_t*>(buffer_alloc(bytes, BufferLife::kept)),  // not zeroed
                 BufferDeleter{bytes, BufferLife::kept}};
    QKV_CHECK(bits.data != nullptr, "Bf16RoundedOperand", "out of memory for ", bytes, " bytes");
    bits.capacity = size_t(n);
  }
}
}  // namespace

Bf16RoundedOperand::Bf16RoundedOperand(const float* p, int64_t rows, int64_t cols, int64_t ld)
    : p_(p), rows_(rows), cols_(cols), ld_(ld) {
  QKV_CHECK(rows >= 0 && cols >= 0 && ld >= cols, "Bf16RoundedOperand",
            "expected a (rows, cols) matrix with row stride >= cols, got (", rows, ", ", cols, ") with ", ld);
  take_spare(bits_, rows * cols);
  round_to_bf16(p, rows, cols, ld, bits_.data.get());
  push();
}

Bf16RoundedOperand::Bf16RoundedOperand(const Tensor& x, Tensor* column_sums)
    : p_(x.data<float>()), rows_(x.size(0)), cols_(x.size(1)), ld_(x.size(1)) {
  take_spare(bits_, rows_ * cols_);
  column_sums_and_bf16(x, *column_sums, bits_.data.get());  // checks x (contiguous f32 (R, N)) and the sums
  push();
}

Bf16RoundedOperand::Bf16RoundedOperand(const Tensor& x, const Tensor& kept) {
  QKV_CHECK(x.ndim() == 2 && x.dtype() == DType::f32 && (x.strides()[1] == 1 || x.size(1) <= 1) &&
                x.strides()[0] >= x.size(1),
            "Bf16RoundedOperand", "expected an f32 (R, K) matrix with unit column stride, got ", x.str());
  p_ = x.data<float>(), rows_ = x.size(0), cols_ = x.size(1), ld_ = std::max<int64_t>(x.strides()[0], cols_);
  // The copy's bytes in a u8 tensor (bf16 is not a dtype tensors are made with): from the caching
  // allocator, so a step's copies reuse the last step's blocks rather than fault in new pages.
  const int64_t bytes = rows_ * cols_ * int64_t(sizeof(uint16_t));
  if (kept.defined()) {
    QKV_CHECK(kept.dtype() == DType::u8 && kept.numel() == bytes && kept.is_contiguous(), "Bf16RoundedOperand",
              "a kept copy of an ", x.shape().str(), " matrix is ", bytes, " contiguous u8 bytes, got ", kept.str());
    kept_ = kept;
  } else {
    kept_ = Tensor::empty(Shape{bytes}, DType::u8);
    round_to_bf16(p_, rows_, cols_, ld_, static_cast<uint16_t*>(kept_.raw_data()));
  }
  push();
}

void Bf16RoundedOperand::push() {
  data_ = kept_.defined() ? static_cast<const uint16_t*>(kept_.raw_data()) : bits_.data.get();
  outer_ = t_operand;
  t_operand = this;
}

Bf16RoundedOperand::~Bf16RoundedOperand() {
  // Out of the thread's list wherever it stands: an outer one may end first (not only last in, first out).
  Bf16RoundedOperand** link = &t_operand;
  while (*link != nullptr && *link != this) link = &(*link)->outer_;
  if (*link == this) *link = outer_;
  if (bits_.capacity > t_spare.capacity) std::swap(bits_, t_spare);
}

const uint16_t* Bf16RoundedOperand::lookup(const float* p, int64_t rows, int64_t cols, int64_t ld) {
  for (Bf16RoundedOperand* o = t_operand; o != nullptr; o = o->outer_)
    if (o->p_ == p && o->rows_ == rows && o->cols_ == cols && o->ld_ == ld) {
      ++o->uses_;
      return o->data_;
    }
  return nullptr;
}

}  // namespace qkv::kernels
