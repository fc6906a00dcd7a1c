#include "ref.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "qkv/kernels/bf16.h"
#include "qkv/tensor/rng.h"

#ifndef QKV_DEFAULT_REF_DIR
#define QKV_DEFAULT_REF_DIR "refs"
#endif

namespace qkv::testing {

std::string ref_dir() {
  const char* env = std::getenv("QKV_REF_DIR");
  return env && *env ? env : QKV_DEFAULT_REF_DIR;
}

namespace {
// The torch version installed now, as tools/gen_refs.py (the CTest fixture that runs before the
// tests) wrote it: "" if it has not run.
std::string installed_torch() {
  std::ifstream f(ref_dir() + "/torch_version.txt");
  std::string v;
  std::getline(f, v);
  return v;
}
}  // namespace

std::string case_dir(const RefFile& ref, const std::string& c) {
  return (std::filesystem::path(ref_dir()) / ref.params(c)["dir"].get<std::string>()).string();
}

Tol scaled_tol(const Tensor& ref) {
  double mx = 0;
  for (double v : ref.to_vector<double>()) mx = std::max(mx, std::abs(v));
  return {kF32.rtol, kF32.atol * std::max(1.0, mx)};
}

RefFile::RefFile(const std::string& stem) : path_(ref_dir() + "/" + stem + ".safetensors") {
  contents_ = safetensors::load(path_);
  auto made = contents_.metadata.find("__torch__");
  QKV_CHECK(made != contents_.metadata.end(), path_, "records no torch version (made by an older tools/gen_refs.py): "
            "regenerate it (tools/gen_refs.py --force)");
  static const std::string installed = installed_torch();
  QKV_CHECK(!installed.empty(), ref_dir(), "has no torch_version.txt: run tools/gen_refs.py (ctest does, as a fixture)");
  QKV_CHECK(made->second == installed, path_, "was computed with torch ", made->second, " but torch ", installed,
            " is installed: regenerate it (tools/gen_refs.py)");
  contents_.metadata.erase(made);  // not a case
}

std::vector<std::string> RefFile::cases() const {
  std::vector<std::string> out;
  for (auto& [k, v] : contents_.metadata) out.push_back(k);
  // A test looping over no cases would pass having checked nothing.
  QKV_CHECK(!out.empty(), path_, "holds no reference cases: regenerate it (tools/gen_refs.py --force)");
  return out;
}

nlohmann::json RefFile::params(const std::string& c) const {
  auto it = contents_.metadata.find(c);
  QKV_CHECK(it != contents_.metadata.end(), path_, "no case '", c, "'");
  return nlohmann::json::parse(it->second);
}

bool RefFile::has(const std::string& c, const std::string& name) const {
  return contents_.tensors.count(c + "/" + name) > 0;
}

Tensor RefFile::get(const std::string& c, const std::string& name) const {
  auto it = contents_.tensors.find(c + "/" + name);
  QKV_CHECK(it != contents_.tensors.end(), path_, "case '", c, "' has no tensor '", name, "'");
  return it->second;
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, Tol tol) {
  if (!actual.defined() || !expected.defined())
    return ::testing::AssertionFailure() << "undefined tensor: actual " << actual.str() << ", expected " << expected.str();
  if (actual.shape() != expected.shape())
    return ::testing::AssertionFailure() << "shape " << actual.shape().str() << " != expected " << expected.shape().str();
  std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  int64_t bad = 0, worst = -1;
  double worst_excess = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double lim = tol.atol + tol.rtol * std::abs(e[i]);
    double err = std::abs(a[i] - e[i]);
    bool ok = err <= lim || (std::isnan(a[i]) && std::isnan(e[i])) || (std::isinf(e[i]) && a[i] == e[i]);
    if (!ok) {
      ++bad;
      double excess = std::isnan(err) ? INFINITY : err / lim;
      if (worst < 0 || excess > worst_excess) { worst = int64_t(i); worst_excess = excess; }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << a.size() << " elements differ (rtol " << tol.rtol << ", atol "
                                       << tol.atol << "); worst at flat index " << worst << ": got " << a[size_t(worst)]
                                       << ", expected " << e[size_t(worst)] << " (" << worst_excess << "x the tolerance)";
}

bool bit_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  Tensor ac = a.contiguous(), bc = b.contiguous();
  return std::memcmp(ac.raw_data(), bc.raw_data(), size_t(a.numel()) * dtype_size(a.dtype())) == 0;
}

Tensor randn(const Shape& shape, uint64_t seed, DType dtype) {
  Generator g(seed);
  Tensor t = Tensor::empty(shape, dtype);
  if (dtype == DType::f64) g.normal(t.data<double>(), t.numel());
  else g.normal(t.data<float>(), t.numel());
  return t;
}

std::vector<float> randn_values(int64_t n, uint64_t seed, float scale) {
  std::vector<float> v = randn(Shape{n}, seed).to_vector<float>();
  for (float& x : v) x *= scale;
  return v;
}

std::string onednn_isa_capped_at_avx512_core() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") ? "avx512_core" : kernels::dnnl_cpu_info().isa;
}

}  // namespace qkv::testing
