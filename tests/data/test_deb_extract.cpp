// extract_deb_files on a package built here with dpkg-deb: its files come out; a copy cut short
// (a cache file damaged after apt-get checked it) is an error naming it, and is removed so that
// the next run downloads it again; an error of the consumer is passed on and removes nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>

#include "qkv/data/debian.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"
#include "scratch_util.h"

namespace fs = std::filesystem;
using namespace qkv::data;

TEST(DebExtract, FilesComeOutAndADamagedCacheFileIsNamedAndRemoved) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_deb_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "pkg" / "DEBIAN");
  fs::create_directories(dir / "pkg" / "usr" / "share" / "qkvtest");
  qkv::write_file_atomic((dir / "pkg" / "DEBIAN" / "control").string(),
                         "Package: qkvtest\nVersion: 1.0\nArchitecture: all\nMaintainer: qkv <qkv@example.org>\n"
                         "Description: a package built by a test\n");
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "line " + std::to_string(i) + " of a file long enough to compress\n";
  qkv::write_file_atomic((dir / "pkg" / "usr" / "share" / "qkvtest" / "data.txt").string(), text);
  const std::string deb = (dir / "qkvtest_1.0_all.deb").string();
  ASSERT_EQ(qkv_test::run_shell("dpkg-deb -Zxz --root-owner-group --build '" + (dir / "pkg").string() + "' '" + deb +
                                "' > /dev/null"),
            0);

  std::map<std::string, std::string> got;
  auto want = [](const std::string& p) { return p == "usr/share/qkvtest/data.txt"; };
  auto keep = [&](const std::string& p, std::string&& d) { got[p] = std::move(d); };
  extract_deb_files(deb, want, keep);
  EXPECT_EQ(got["usr/share/qkvtest/data.txt"], text);

  // The consumer's own error: passed on, the package stays.
  EXPECT_THROW(extract_deb_files(deb, want, [](const std::string&, std::string&&) { throw qkv::Error("bad row"); }),
               qkv::Error);
  EXPECT_TRUE(fs::exists(deb));

  // Cut short: named, and removed from the cache.
  fs::resize_file(deb, fs::file_size(deb) / 2);
  try {
    extract_deb_files(deb, want, keep);
    ADD_FAILURE() << "a truncated package was read";
  } catch (const qkv::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(deb + ": cannot be read as a Debian package"), std::string::npos) << m;
    EXPECT_NE(m.find("removed it from the cache: run the command again to download it again"), std::string::npos) << m;
  }
  EXPECT_FALSE(fs::exists(deb));
  fs::remove_all(dir);
}
