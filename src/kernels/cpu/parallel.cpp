#include "qkv/kernels/parallel.h"

#include <strings.h>

#include <cstdlib>

namespace qkv::kernels {

bool idle_threads_spin() {
  static const bool spin = [] {
    if (const char* n = std::getenv("GOMP_SPINCOUNT"))  // a count (with k/M/G suffixes) or "infinite"
      return n[0] == 'i' || n[0] == 'I' || std::strtoll(n, nullptr, 10) > 0;
    const char* policy = std::getenv("OMP_WAIT_POLICY");
    return !(policy && strcasecmp(policy, "passive") == 0);
  }();
  return spin;
}

}  // namespace qkv::kernels
