// GNU .mo reader. Layout (all words 32-bit, in the file's byte order):
//   0 magic 0x950412de | 4 revision | 8 N strings | 12 O: table of original strings
//   16 T: table of translations | 20 hash size | 24 hash offset
// Each table holds N (length, offset) pairs; string i occupies [offset, offset+length) and is
// followed by a NUL. msgid "ctx\x04id" carries a context; "id\0plural" a plural, whose msgstr
// holds the forms separated by NULs.
#include "qkv/data/mo.h"

#include <algorithm>
#include <cctype>

#include "qkv/util/error.h"
#include "qkv/util/file.h"

namespace qkv::data {
namespace {

constexpr uint32_t kMagic = 0x950412de;
constexpr uint32_t kMagicSwapped = 0xde120495;
constexpr size_t kHeaderSize = 28;

uint32_t load_le(const std::string& b, size_t at) {
  const auto* p = reinterpret_cast<const unsigned char*>(b.data()) + at;
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
uint32_t load_be(const std::string& b, size_t at) {
  const auto* p = reinterpret_cast<const unsigned char*>(b.data()) + at;
  return uint32_t(p[3]) | uint32_t(p[2]) << 8 | uint32_t(p[1]) << 16 | uint32_t(p[0]) << 24;
}

std::vector<std::string> split_nul(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t z = s.find('\0', start);
    if (z == std::string::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, z - start));
    start = z + 1;
  }
}

}  // namespace

MoCatalog parse_mo(const std::string& bytes, const std::string& source) {
  const std::string where = "mo file '" + source + "'";
  MoCatalog cat;
  cat.source = source;
  QKV_CHECK(bytes.size() >= kHeaderSize, where, "truncated header: expected at least ",
            kHeaderSize, " bytes, file has ", bytes.size());
  const uint32_t magic = load_le(bytes, 0);
  QKV_CHECK(magic == kMagic || magic == kMagicSwapped, where,
            "bad magic: expected 0x950412de in either byte order, got 0x", std::hex, magic);
  cat.big_endian = magic == kMagicSwapped;
  auto word = [&](size_t at) { return cat.big_endian ? load_be(bytes, at) : load_le(bytes, at); };
  cat.revision = word(4);
  QKV_CHECK((cat.revision >> 16) <= 1, where, "unsupported major revision ",
            cat.revision >> 16, " (expected 0 or 1)");
  const uint64_t n = word(8), orig_table = word(12), trans_table = word(16);
  const uint64_t size = bytes.size();
  QKV_CHECK(orig_table + n * 8 <= size, where, "table of original strings (offset ", orig_table,
            ", ", n, " entries) ends at byte ", orig_table + n * 8, ", past end of file (", size,
            " bytes)");
  QKV_CHECK(trans_table + n * 8 <= size, where, "table of translations (offset ", trans_table,
            ", ", n, " entries) ends at byte ", trans_table + n * 8, ", past end of file (", size,
            " bytes)");

  auto string_at = [&](uint64_t table, uint64_t i, const char* what) {
    const uint64_t len = word(table + i * 8), off = word(table + i * 8 + 4);
    QKV_CHECK(off + len < size, where, "entry ", i, ": ", what, " at offset ", off, " length ",
              len, " (+1 NUL) runs past end of file (", size, " bytes)");
    QKV_CHECK(bytes[off + len] == '\0', where, "entry ", i, ": ", what, " at offset ", off,
              " length ", len, " is not NUL-terminated");
    return bytes.substr(off, len);
  };

  cat.entries.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    std::string id = string_at(orig_table, i, "msgid");
    std::string str = string_at(trans_table, i, "msgstr");
    MoEntry e;
    if (size_t eot = id.find('\x04'); eot != std::string::npos) {
      e.has_context = true;
      e.context = id.substr(0, eot);
      id.erase(0, eot + 1);
    }
    if (size_t z = id.find('\0'); z != std::string::npos) {
      e.is_plural = true;
      e.msgid_plural = id.substr(z + 1);
      id.resize(z);
      e.msgstr = split_nul(str);
    } else {
      e.msgstr.push_back(std::move(str));
    }
    e.msgid = std::move(id);
    cat.entries.push_back(std::move(e));
  }
  return cat;
}

MoCatalog read_mo(const std::string& path) { return parse_mo(read_file(path), path); }

std::string MoCatalog::header() const {
  for (const auto& e : entries)
    if (!e.has_context && e.msgid.empty() && !e.msgstr.empty()) return e.msgstr[0];
  return "";
}

std::string MoCatalog::charset() const {
  std::string h = header();
  std::string lower(h);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  size_t p = lower.find("charset=");
  if (p == std::string::npos) return "";
  p += 8;
  size_t end = p;
  while (end < lower.size() && !std::isspace(static_cast<unsigned char>(lower[end])) &&
         lower[end] != ';')
    ++end;
  return lower.substr(p, end - p);
}

}  // namespace qkv::data
