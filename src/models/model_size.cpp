// Model size limits (model_size.h).
#include "qkv/models/model_size.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "qkv/util/error.h"

namespace qkv::models {

void check_size(const char* where, const char* key, int64_t value, int64_t lo, int64_t hi) {
  QKV_CHECK(value >= lo && value <= hi, where, key, " must be in [", lo, ", ", hi, "], got ", value);
}

void check_parameters_fit(const char* where, double parameters) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return;  // unknown: nothing to compare with
  const double gib = 1024.0 * 1024 * 1024, need = parameters * 4, have = double(pages) * double(page);
  if (need <= have) return;
  char text[160];
  std::snprintf(text, sizeof text, "%.0f million parameters, %.1f GiB in fp32 for the weights alone", parameters / 1e6,
                need / gib);
  fail(where, "the model would have ", text, ", more than this machine's ", std::round(have / gib * 10) / 10,
       " GiB of memory");
}

}  // namespace qkv::models
