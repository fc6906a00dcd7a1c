// Fuzz target: a .safetensors file (model.safetensors, any tensor file qkv loads).
#include "fuzz_target.h"
#include "qkv/io/format/safetensors.h"

QKV_FUZZ_TARGET(safetensors) {
  const std::string source = "fuzz.safetensors";
  qkv::fuzz::expect_clean(source, [&] {
    qkv::safetensors::Contents c = qkv::safetensors::parse(std::string(reinterpret_cast<const char*>(data), size), source);
    for (auto& [name, t] : c.tensors) (void)t.contiguous();  // every accepted tensor is readable
  });
  return 0;
}
