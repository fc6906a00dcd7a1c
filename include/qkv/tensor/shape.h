// qkv/tensor/shape.h - Shape: up to kMaxDims extents, row-major; also used for strides.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace qkv {

constexpr int kMaxDims = 6;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);

  int ndim() const { return n_; }
  int64_t operator[](int i) const { return d_[i]; }
  int64_t& operator[](int i) { return d_[i]; }
  int64_t at(int i) const;          // negative i counts from the back; throws if out of range
  int64_t numel() const;            // product of extents (1 for a scalar)
  int64_t back() const { return d_[n_ - 1]; }
  void push_back(int64_t v);
  std::vector<int64_t> vec() const { return {d_.begin(), d_.begin() + n_}; }
  const int64_t* begin() const { return d_.data(); }
  const int64_t* end() const { return d_.data() + n_; }
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string str() const;          // "(2, 3, 4)"

  static Shape contiguous_strides(const Shape& s);
  static Shape broadcast(const Shape& a, const Shape& b, const char* op);  // numpy rules; throws

 private:
  std::array<int64_t, kMaxDims> d_{};
  int n_ = 0;
};

// Normalises a possibly-negative axis against ndim; throws naming op if out of range.
int normalize_axis(int axis, int ndim, const char* op);

}  // namespace qkv
