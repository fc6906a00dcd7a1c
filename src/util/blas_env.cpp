#include "qkv/util/blas_env.h"

#include <unistd.h>

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

}  // namespace qkv
