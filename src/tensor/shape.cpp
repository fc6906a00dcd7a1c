#include "qkv/tensor/shape.h"

#include <sstream>

#include "qkv/util/error.h"

namespace qkv {

Shape::Shape(std::initializer_list<int64_t> dims) {
  QKV_CHECK(dims.size() <= kMaxDims, "Shape", "at most ", kMaxDims, " dims, got ", dims.size());
  for (int64_t v : dims) push_back(v);
}

Shape::Shape(const std::vector<int64_t>& dims) {
  QKV_CHECK(dims.size() <= kMaxDims, "Shape", "at most ", kMaxDims, " dims, got ", dims.size());
  for (int64_t v : dims) push_back(v);
}

void Shape::push_back(int64_t v) {
  QKV_CHECK(n_ < kMaxDims, "Shape", "at most ", kMaxDims, " dims");
  QKV_CHECK(v >= 0, "Shape", "negative extent ", v);
  d_[n_++] = v;
}

int64_t Shape::at(int i) const {
  int j = i < 0 ? i + n_ : i;
  QKV_CHECK(j >= 0 && j < n_, "Shape", "axis ", i, " out of range for ", str());
  return d_[j];
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < n_; ++i)
    if (d_[i] == 0) return 0;  // before any product can overflow: {2^40, 2^40, 0} has none
  for (int i = 0; i < n_; ++i)
    QKV_CHECK(!__builtin_mul_overflow(n, d_[i], &n), "Shape", str(), " has more elements than an int64 counts");
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (n_ != o.n_) return false;
  for (int i = 0; i < n_; ++i)
    if (d_[i] != o.d_[i]) return false;
  return true;
}

std::string Shape::str() const {
  std::ostringstream os;
  os << '(';
  for (int i = 0; i < n_; ++i) os << (i ? ", " : "") << d_[i];
  os << ')';
  return os.str();
}

Shape Shape::contiguous_strides(const Shape& s) {
  Shape st = s;
  int64_t acc = 1;
  for (int i = s.ndim() - 1; i >= 0; --i) {
    st.d_[i] = acc;
    acc *= s[i];
  }
  return st;
}

Shape Shape::broadcast(const Shape& a, const Shape& b, const char* op) {
  int n = std::max(a.ndim(), b.ndim());
  std::vector<int64_t> out(n);
  for (int i = 0; i < n; ++i) {
    int ia = a.ndim() - n + i, ib = b.ndim() - n + i;
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    QKV_CHECK(da == db || da == 1 || db == 1, op, "shapes ", a.str(), " and ", b.str(),
              " do not broadcast (dim ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return Shape(out);
}

int normalize_axis(int axis, int ndim, const char* op) {
  int a = axis < 0 ? axis + ndim : axis;
  QKV_CHECK(a >= 0 && a < std::max(ndim, 1), op, "axis ", axis, " out of range for ", ndim, "-d tensor");
  return a;
}

}  // namespace qkv
