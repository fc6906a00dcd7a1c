// qa-debian's rules (data/corpus_qa.h) on synthetic package records, and the SQuAD-shaped JSON
// lines (data/qa_examples.h): answers are spans of the context at answer_start (characters),
// errors name file:line and the field.
#include "qkv/data/corpus_qa.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "qkv/util/error.h"
#include "scratch_util.h"
#include "qkv/util/utf8.h"

using namespace qkv;
using namespace qkv::data;
namespace fs = std::filesystem;

namespace {

QaPackage sample() {
  QaPackage p;
  p.package = "libfoo-tools";
  p.source = "foo";
  p.version = "1:2.3.4-1+b2";
  p.maintainer = "Jörg Müller <joerg@example.org>";
  p.section = "utils";
  p.homepage = "https://foo.example.org/";
  p.summary = "tools for the foo format";
  p.description = "Foo is a small library written in C++. See https://foo.example.org/docs/intro.html, "
                  "or the manual.";
  return p;
}

std::map<std::string, QaExample> by_rule(const std::vector<QaExample>& es) {
  std::map<std::string, QaExample> m;
  for (auto& e : es) m[qa_rule_of(e.id)] = e;
  return m;
}

std::string scratch_file(const std::string& name, const std::string& text) {
  const fs::path p = fs::path(::testing::TempDir()) / ("qkv_qa_" + name + "_" + std::to_string(::getpid()));
  std::ofstream(p) << text;
  return p.string();
}

}  // namespace

TEST(QaDebian, ContextRendersTheFieldsAndTheDescription) {
  EXPECT_EQ(qa_context(sample()),
            "Package: libfoo-tools\nSource: foo\nVersion: 1:2.3.4-1+b2\nMaintainer: Jörg Müller <joerg@example.org>\n"
            "Section: utils\nHomepage: https://foo.example.org/\nDescription: tools for the foo format\n"
            "Foo is a small library written in C++. See https://foo.example.org/docs/intro.html, or the manual.");
  QaPackage p = sample();
  p.source = "libfoo-tools", p.homepage = "";  // the source line only when it differs; no empty homepage line
  EXPECT_EQ(qa_context(p).find("Source:"), std::string::npos);
  EXPECT_EQ(qa_context(p).find("Homepage:"), std::string::npos);
}

TEST(QaDebian, EveryRuleAnswersWithASpanOfTheContext) {
  auto es = qa_questions(sample());
  auto r = by_rule(es);
  const std::map<std::string, std::pair<std::string, std::string>> want = {
      {"version", {"Which version of libfoo-tools is this?", "1:2.3.4-1+b2"}},
      {"maintainer", {"Who maintains libfoo-tools?", "Jörg Müller"}},
      {"maintainer_email", {"What is the e-mail address of libfoo-tools's maintainer?", "joerg@example.org"}},
      {"section", {"What section is libfoo-tools in?", "utils"}},
      {"homepage", {"What is the homepage of libfoo-tools?", "https://foo.example.org/"}},
      {"source", {"Which source package is libfoo-tools built from?", "foo"}},
      {"summary", {"What is libfoo-tools in one line?", "tools for the foo format"}},
      {"description_url", {"Which web address does the description of libfoo-tools mention?",
                           "https://foo.example.org/docs/intro.html"}},
      {"written_in", {"What programming language is libfoo-tools written in?", "C++"}}};
  ASSERT_EQ(es.size(), want.size());
  for (auto& [rule, qa] : want) {
    SCOPED_TRACE(rule);
    ASSERT_TRUE(r.count(rule));
    const QaExample& e = r[rule];
    EXPECT_EQ(e.id, "libfoo-tools/" + rule);
    EXPECT_EQ(e.question, qa.first);
    ASSERT_EQ(e.answers.size(), 1u);
    EXPECT_EQ(e.answers[0].text, qa.second);
    // answer_start counts characters: "ö" and "ü" before it are one each
    const std::u32string ctx32 = utf8::to_u32_strict(e.context, "ctx");
    EXPECT_EQ(utf8::from_u32(ctx32.substr(size_t(e.answers[0].answer_start), utf8::to_u32_strict(qa.second, "a").size())),
              qa.second);
    // and it reads back through the JSON-lines parser, which checks the span
    QaExample back = parse_qa_line(qa_example_json(e), "t:1", true, false);
    EXPECT_EQ(back.answers[0].answer_start, e.answers[0].answer_start);
    EXPECT_EQ(back.context, e.context);
  }
  // the e-mail's answer_start counts the two non-ASCII letters of the name as one character each
  EXPECT_EQ(r["maintainer_email"].answers[0].answer_start,
            int64_t(r["maintainer_email"].context.find("joerg@")) - 2);
}

TEST(QaDebian, RulesThatDoNotApplyAskNothing) {
  QaPackage p = sample();
  p.maintainer = "Debian Go Packaging Team";  // no address: no name/e-mail questions
  p.source = "";
  p.homepage = "";
  p.description = "Written in Cobol. Also written in Pythonic style; see http://x.";  // no listed language, URL too short
  auto r = by_rule(qa_questions(p));
  for (const char* rule : {"maintainer", "maintainer_email", "homepage", "source", "written_in", "description_url"})
    EXPECT_EQ(r.count(rule), 0u) << rule;
  EXPECT_EQ(r.size(), 3u);  // version, section, summary
  p.description = "A tool written in C, with bindings written in Python.";
  EXPECT_EQ(by_rule(qa_questions(p))["written_in"].answers[0].text, "C");
  p.description = "see <https://example.org/a_b>.";
  EXPECT_EQ(by_rule(qa_questions(p))["description_url"].answers[0].text, "https://example.org/a_b");
}

TEST(QaExamples, ErrorsNameFileLineAndField) {
  auto expect_error = [](const std::string& text, const std::vector<std::string>& parts) {
    const std::string f = scratch_file("bad", text);
    try {
      read_qa_file(f, true);
      ADD_FAILURE() << "no error for " << text;
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(f + ":2"), std::string::npos) << m;
      for (auto& p : parts) EXPECT_NE(m.find(p), std::string::npos) << m;
    }
    fs::remove(f);
  };
  const std::string good = R"({"id":"a","question":"Who?","context":"Jörg did it.","answers":[{"text":"did","answer_start":5}]})";
  expect_error(good + "\n{\"question\": \"x\", \n", {"not a valid JSON line"});
  expect_error(good + "\n" + R"({"question":"Who?","context":"Jörg did it.","answers":[{"text":"did","answer_start":6}]})",
               {"answers[0].answer_start", "'id '", "'did'"});
  expect_error(good + "\n" + R"({"question":"Who?","context":"abc","answers":[{"text":"c","answer_start":9}]})",
               {"answers[0].answer_start", "past the end"});
  expect_error(good + "\n" + R"({"question":"Who?","context":"abc","answers":[]})", {"answers", "at least one"});
  expect_error(good + "\n" + R"({"question":"Who?","contxt":"abc"})", {"unknown field 'contxt'"});
  expect_error(good + "\n" + R"({"question":7,"context":"abc","answers":[{"text":"a","answer_start":0}]})",
               {"field 'question'", "expected a string"});
  // Questions to answer: a blank line is refused by number (skipped, it shifted every later answer).
  const std::string blank = scratch_file("blank", good + "\n\n" + "Who did it?\tJörg did it.\n");
  try {
    read_qa_file(blank, false, true);
    ADD_FAILURE() << "a blank line among questions to answer was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(blank + ":2: a blank line"), std::string::npos) << e.what();
  }
  fs::remove(blank);
  const std::string spaced = scratch_file("spaced", good + "\n\n" + good + "\n");
  EXPECT_EQ(read_qa_file(spaced, true).size(), 2u);  // training data: blank lines are skipped
  fs::remove(spaced);
  const std::string f = scratch_file("good", good + "\n" + "Who did it?\tJörg did it.\n");
  auto es = read_qa_file(f, false, true);
  ASSERT_EQ(es.size(), 2u);
  EXPECT_EQ(es[0].answers[0].byte_begin, 6);  // "Jörg " is 6 bytes, 5 characters
  EXPECT_EQ(es[1].question, "Who did it?");
  EXPECT_EQ(es[1].context, "Jörg did it.");
  EXPECT_THROW(read_qa_file(f, true, true), Error);  // the tab line has no answers
  fs::remove(f);
}

// The real corpus (bookworm's indexes, fetched once into the cache): every line reads back through
// the checking reader (each answer is the context's text at answer_start), the counts are
// stats.json's, ids are unique, and no source package has questions in two splits.
TEST(NetworkCorpus, QaDebianBuildsAndEveryAnswerIsASpanOfItsContext) {
  const std::string dir = qkv_test::scratch_dir("net_qa");
  QaCorpusOptions o;
  o.build.data_dir = dir;
  o.max_packages = 1500;
  const BuildResult r = build_qa_corpus(o);
  ASSERT_TRUE(r.built);
  EXPECT_FALSE(build_qa_corpus(o).built);  // the stamp matches: nothing to do
  std::map<std::string, std::string> split_of_source;
  std::set<std::string> ids;
  size_t packages = 0;
  for (const char* split : {"train", "valid", "test"}) {
    const auto es = read_qa_file(r.out_dir + "/" + split + ".jsonl", true);
    EXPECT_EQ(es.size(), r.stats["splits"][split]["examples"].get<size_t>()) << split;
    uint64_t per_rule = 0;
    for (auto& [rule, n] : r.stats["splits"][split]["classes"].items()) per_rule += n.get<uint64_t>();
    EXPECT_EQ(per_rule, es.size());
    for (const QaExample& e : es) {
      EXPECT_TRUE(ids.insert(e.id).second) << e.id;
      const std::string pkg = e.context.substr(9, e.context.find('\n') - 9);  // "Package: X\n..."
      EXPECT_EQ(e.id.rfind(pkg + "/", 0), 0u) << e.id;
      const size_t src = e.context.find("\nSource: ");
      const std::string source = src == std::string::npos ? pkg : e.context.substr(src + 9, e.context.find('\n', src + 1) - src - 9);
      auto [it, fresh] = split_of_source.emplace(source, split);
      EXPECT_EQ(it->second, split) << source;
      packages += e.id == pkg + "/version";
    }
  }
  EXPECT_EQ(packages, 1500u);  // every context has its version question
  fs::remove_all(dir);
}
