// Fuzz target: a GNU gettext .mo catalog (the translation corpora's source, data/mo.h).
#include "fuzz_target.h"
#include "qkv/data/mo.h"

QKV_FUZZ_TARGET(mo) {
  const std::string source = "fuzz.mo";
  qkv::fuzz::expect_clean(source, [&] {
    qkv::data::parse_mo(std::string(reinterpret_cast<const char*>(data), size), source);
  });
  return 0;
}
