// data::read_documents: one document per line, or blank-line separated documents.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "qkv/data/documents.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"
#include "scratch_util.h"

namespace fs = std::filesystem;
using qkv::data::read_documents;

namespace {
std::string write_tmp(const std::string& name, const std::string& text) {
  fs::path p = fs::path(qkv_test::scratch_dir("documents_" + name)) / "documents.txt";  // under the build tree
  qkv::write_file_atomic(p.string(), text);
  return p.string();
}
}  // namespace

TEST(Documents, OnePerLineWithoutBlankLines) {
  auto d = read_documents(write_tmp("lines", "first doc\nsecond doc\r\nthird\n"));
  EXPECT_EQ(d, (std::vector<std::string>{"first doc", "second doc", "third"}));
}

TEST(Documents, BlankLineSeparated) {
  auto d = read_documents(write_tmp("paras", "a1\na2\n\n  \nb1\n\nc1\nc2\nc3\n\n"));
  EXPECT_EQ(d, (std::vector<std::string>{"a1\na2", "b1", "c1\nc2\nc3"}));
}

TEST(Documents, TrailingBlankLinesDoNotMakeParagraphs) {
  auto d = read_documents(write_tmp("trail", "x y\nz\n\n\n"));
  EXPECT_EQ(d, (std::vector<std::string>{"x y", "z"}));
}

TEST(Documents, ErrorsNameTheFileAndLine) {
  auto p = write_tmp("bad", "ok\nbad \xff byte\n");
  try {
    read_documents(p);
    FAIL() << "no error";
  } catch (const qkv::Error& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_documents(write_tmp("empty", "\n \n")), qkv::Error);
}
