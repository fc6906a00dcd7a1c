#include "qkv/util/blas_env.h"

#include <unistd.h>

#include <cstdlib>

namespace qkv {

void reexec_with_blas_settings(char** argv) {
  if (std::getenv("QKV_NO_REEXEC") || std::getenv("OPENBLAS_CORETYPE")) return;
  if (!__builtin_cpu_supports("avx512f")) return;
  setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
  setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
  setenv("QKV_NO_REEXEC", "1", 1);
  execv("/proc/self/exe", argv);  // on failure, carry on with the defaults
}

}  // namespace qkv
