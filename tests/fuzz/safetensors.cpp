// Fuzz target: a .safetensors file (model.safetensors, any tensor file qkv loads), both ways qkv
// reads one: parsed from memory (safetensors::parse) and read from the file tensor by tensor
// (safetensors::load, built on safetensors::Reader). Both must accept or refuse it alike.
#include "fuzz_target.h"
#include "qkv/io/format/safetensors.h"

QKV_FUZZ_TARGET(safetensors) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const std::string source = "fuzz.safetensors";
  bool parsed = false;
  qkv::fuzz::expect_clean(source, [&] {
    qkv::safetensors::Contents c = qkv::safetensors::parse(bytes, source);
    for (auto& [name, t] : c.tensors) (void)t.contiguous();  // every accepted tensor is readable
    parsed = true;
  });
  const std::string path = qkv::fuzz::scratch_file("fuzz_file.safetensors", bytes);
  bool loaded = false;
  qkv::fuzz::expect_clean(path, [&] {
    (void)qkv::safetensors::load(path);
    loaded = true;
  });
  if (parsed != loaded) qkv::fuzz::bug(std::string("parse ") + (parsed ? "accepts" : "refuses") + " what load " +
                                       (loaded ? "accepts" : "refuses"));
  return 0;
}
