// src/util/unicode_tables.h - private: the generated tables of unicode_tables.cpp
// (tools/gen_unicode_tables.py). Ranges are sorted and inclusive.
#pragma once
#include <cstddef>
#include <cstdint>

namespace qkv::unicode_tables {

struct Range {
  uint32_t lo, hi;
};
struct MapEntry {
  uint32_t cp, offset, len;  // mapping = pool[offset, offset + len)
};
struct CccRange {
  uint32_t lo, hi, ccc;
};

#define QKV_RANGES(name) extern const Range k##name[]; extern const size_t k##name##Count;
QKV_RANGES(Letter)
QKV_RANGES(Number)
QKV_RANGES(Punct)
QKV_RANGES(Control)
QKV_RANGES(SpaceSep)
QKV_RANGES(Nonspacing)
QKV_RANGES(Cased)
QKV_RANGES(CaseIgnorable)
QKV_RANGES(PySpace)
#undef QKV_RANGES
extern const uint32_t kLowerPool[];
extern const MapEntry kLower[];
extern const size_t kLowerCount;
extern const uint32_t kNfdPool[];
extern const MapEntry kNfd[];
extern const size_t kNfdCount;
extern const CccRange kCcc[];
extern const size_t kCccCount;
extern const char kUnicodeVersion[];

}  // namespace qkv::unicode_tables
