// qkv/data/mo.h - reader for GNU gettext binary catalogs (.mo), written from the format spec
// (gettext manual, "The Format of GNU MO Files"). Both byte orders, msgctxt, plural entries.
// Every offset and length is bounds-checked; a bad file raises qkv::Error naming the file, the
// entry index and what was wrong.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace qkv::data {

struct MoEntry {
  std::string context;              // msgctxt ("" if none; see has_context)
  std::string msgid;                // singular source string
  std::string msgid_plural;         // "" unless is_plural
  std::vector<std::string> msgstr;  // one form, or one per plural form
  bool has_context = false;
  bool is_plural = false;
};

struct MoCatalog {
  std::string source;              // file name used in messages
  bool big_endian = false;         // magic read as 0xde120495 in little-endian order
  uint32_t revision = 0;
  std::vector<MoEntry> entries;    // file order (sorted by original msgid bytes)
  // The header entry's msgstr (msgid "" without context), "" if absent.
  std::string header() const;
  // "charset=" of the Content-Type header field, lower-cased; "" if absent.
  std::string charset() const;
};

// Parses a .mo image held in memory; `source` names it in errors.
MoCatalog parse_mo(const std::string& bytes, const std::string& source);
// Reads and parses a .mo file.
MoCatalog read_mo(const std::string& path);

}  // namespace qkv::data
