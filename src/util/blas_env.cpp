#include "qkv/util/blas_env.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace qkv {

void reexec_with_blas_settings(char** argv) {
  if (std::getenv("QKV_NO_REEXEC")) return;
  bool changed = false;
  if (!std::getenv("OPENBLAS_CORETYPE") && __builtin_cpu_supports("avx512f")) {
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
    changed = true;
  }
  if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT")) {
    setenv("GOMP_SPINCOUNT", kGompSpinCount, 1);
    changed = true;
  }
  if (!changed) return;
  setenv("QKV_NO_REEXEC", "1", 1);
  execv("/proc/self/exe", argv);  // on failure, carry on with the defaults
}

CpuVectorIsa this_cpu_vector_isa() {
  return {__builtin_cpu_supports("avx") != 0, __builtin_cpu_supports("avx2") != 0,
          __builtin_cpu_supports("avx512f") != 0};
}

std::string blas_coretype_error(const char* coretype, CpuVectorIsa cpu) {
  if (!coretype) return "";
  std::string name(coretype);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  const char* need = nullptr;
  if (name == "skylakex" || name == "cooperlake" || name == "sapphirerapids") need = cpu.avx512f ? nullptr : "AVX-512";
  else if (name == "haswell" || name == "zen") need = cpu.avx2 ? nullptr : "AVX2";
  else if (name == "sandybridge") need = cpu.avx ? nullptr : "AVX";
  if (!need) return "";
  return std::string("OPENBLAS_CORETYPE=") + coretype + " forces OpenBLAS kernels that need " + need +
         ", which this CPU does not have (the first matrix product would stop with an illegal instruction): "
         "unset OPENBLAS_CORETYPE (qkv sets SkylakeX itself on AVX-512 CPUs)";
}

}  // namespace qkv
