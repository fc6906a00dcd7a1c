// .mo parser against files written by tools/text/make_mo.py (own writer, both byte orders, and
// GNU msgfmt when installed), cross-checked with Python's gettext.GNUTranslations.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "dependency_skip.h"
#include "scratch_util.h"
#include "qkv/data/mo.h"
#include "qkv/util/error.h"

using namespace qkv::data;
using nlohmann::json;

namespace {

struct MoFixture : ::testing::Test {
  static inline std::string dir;
  static inline json expected;
  static void SetUpTestSuite() {
    dir = qkv_test::scratch_dir("mo");
    int rc = qkv_test::run_shell(qkv_test::python() + " " + qkv_test::tool("make_mo.py") + " " + dir);
    ASSERT_EQ(rc, 0) << "make_mo.py failed";
    expected = json::parse(qkv::read_file(dir + "/expected.json"));
  }
};

// The catalog as Python's gettext keys it: "ctx\x04id" -> str, or ("ctx\x04id", i) -> form i.
std::map<std::string, std::string> python_view(const MoCatalog& c) {
  std::map<std::string, std::string> m;
  for (const auto& e : c.entries) {
    std::string key = (e.has_context ? e.context + "\x04" : "") + e.msgid;
    if (e.is_plural) {
      for (size_t i = 0; i < e.msgstr.size(); ++i) m["P" + key + "#" + std::to_string(i)] = e.msgstr[i];
    } else {
      m["S" + key] = e.msgstr.at(0);
    }
  }
  return m;
}

void expect_matches_entries(const MoCatalog& c, const json& entries, bool skip_untranslated) {
  // Expected entries keyed the same way as the parser output (order: sorted by msgid bytes).
  std::map<std::string, json> want;
  for (const auto& e : entries) {
    bool all_empty = true;
    for (const auto& s : e["str"]) all_empty &= s.get<std::string>().empty();
    if (skip_untranslated && all_empty) continue;
    std::string key = (e["ctx"].is_null() ? "" : e["ctx"].get<std::string>() + "\x04") +
                      e["id"].get<std::string>();
    want[key] = e;
  }
  ASSERT_EQ(c.entries.size(), want.size()) << c.source;
  for (const auto& e : c.entries) {
    std::string key = (e.has_context ? e.context + "\x04" : "") + e.msgid;
    auto it = want.find(key);
    ASSERT_NE(it, want.end()) << "unexpected entry '" << key << "' in " << c.source;
    const json& w = it->second;
    EXPECT_EQ(e.has_context, !w["ctx"].is_null()) << key;
    EXPECT_EQ(e.is_plural, !w["plural"].is_null()) << key;
    if (e.is_plural) {
      EXPECT_EQ(e.msgid_plural, w["plural"].get<std::string>()) << key;
    }
    EXPECT_EQ(e.msgstr, w["str"].get<std::vector<std::string>>()) << key;
  }
}

}  // namespace

TEST_F(MoFixture, LittleEndianMatchesWrittenEntries) {
  MoCatalog c = read_mo(dir + "/basic_le.mo");
  EXPECT_FALSE(c.big_endian);
  expect_matches_entries(c, expected["entries"], false);
  EXPECT_EQ(c.charset(), "utf-8");
  EXPECT_NE(c.header().find("Plural-Forms: nplurals=2"), std::string::npos);
}

TEST_F(MoFixture, BigEndianMatchesWrittenEntries) {
  MoCatalog c = read_mo(dir + "/basic_be.mo");
  EXPECT_TRUE(c.big_endian);
  expect_matches_entries(c, expected["entries"], false);
}

TEST_F(MoFixture, MatchesPythonGettextCatalog) {
  MoCatalog c = read_mo(dir + "/basic_le.mo");
  std::map<std::string, std::string> want;
  for (const auto& kv : expected["python_catalog"]) {
    if (kv[0].is_array())
      want["P" + kv[0][0].get<std::string>() + "#" + std::to_string(kv[0][1].get<int>())] =
          kv[1].get<std::string>();
    else
      want["S" + kv[0].get<std::string>()] = kv[1].get<std::string>();
  }
  EXPECT_EQ(python_view(c), want);
  EXPECT_EQ(python_view(read_mo(dir + "/basic_be.mo")), want);
}

TEST_F(MoFixture, GnuMsgfmtOutputBothByteOrders) {
  if (!expected["msgfmt"].get<bool>()) QKV_SKIP_MISSING_DEPENDENCY() << "GNU msgfmt not installed (package gettext)";
  MoCatalog le = read_mo(dir + "/msgfmt_le.mo"), be = read_mo(dir + "/msgfmt_be.mo");
  EXPECT_FALSE(le.big_endian);
  EXPECT_TRUE(be.big_endian);
  // msgfmt leaves out untranslated entries.
  expect_matches_entries(le, expected["entries"], true);
  expect_matches_entries(be, expected["entries"], true);
}

TEST_F(MoFixture, CorruptFilesGiveSpecificErrors) {
  ASSERT_GE(expected["corrupt"].size(), 8u);
  for (const auto& c : expected["corrupt"]) {
    const std::string path = dir + "/corrupt/" + c["file"].get<std::string>();
    try {
      read_mo(path);
      ADD_FAILURE() << "no error for " << path;
    } catch (const qkv::Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << "message does not name the file: " << msg;
      for (const auto& s : c["expect"])
        EXPECT_NE(msg.find(s.get<std::string>()), std::string::npos)
            << "'" << s.get<std::string>() << "' missing from: " << msg;
    }
  }
}

TEST(Mo, EmptyCatalogAndMissingFile) {
  // 28-byte header with zero strings is a valid, empty catalog.
  std::string b(28, '\0');
  const unsigned char magic[4] = {0xde, 0x12, 0x04, 0x95};
  for (int i = 0; i < 4; ++i) b[i] = char(magic[i]);
  b[12] = 28;
  b[16] = 28;
  MoCatalog c = parse_mo(b, "empty");
  EXPECT_TRUE(c.entries.empty());
  EXPECT_EQ(c.header(), "");
  EXPECT_THROW(read_mo("/nonexistent/x.mo"), qkv::Error);
}
