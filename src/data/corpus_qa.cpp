// qa-debian: rule-generated questions over package metadata (qkv/data/corpus_qa.h).
#include "qkv/data/corpus_qa.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>

#include "qkv/data/corpus.h"
#include "qkv/data/debian.h"
#include "qkv/text/qa_features.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace qkv::data {

namespace {

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '+' ||
         c == '#' || (unsigned char)c >= 0x80;
}

// The first http(s):// URL of a text: up to white space, without trailing punctuation.
std::pair<size_t, std::string> first_url(const std::string& s) {
  for (size_t at = 0; (at = s.find("http", at)) != std::string::npos; ++at) {
    if (s.compare(at, 7, "http://") != 0 && s.compare(at, 8, "https://") != 0) continue;
    if (at > 0 && is_word_char(s[at - 1])) continue;
    size_t e = s.find_first_of(" \t\n<>\"", at);
    if (e == std::string::npos) e = s.size();
    while (e > at && std::string_view(".,;:)'\"").find(s[e - 1]) != std::string_view::npos) --e;
    std::string url = s.substr(at, e - at);
    if (url.size() > 10) return {at, url};
  }
  return {std::string::npos, ""};
}

// "written in L" with L a whole word from the list (longest names first: "C++" before "C").
std::pair<size_t, std::string> written_in(const std::string& s) {
  static const std::vector<std::string> langs = [] {
    std::vector<std::string> v = {"C++", "C#", "C", "Python", "Perl", "Java", "JavaScript", "TypeScript", "Rust", "Go",
                                  "Ruby", "OCaml", "Haskell", "Lua", "PHP", "Tcl", "Vala", "Scheme", "Common Lisp",
                                  "Lisp", "Fortran", "Erlang", "Elixir", "Scala", "Kotlin", "Pascal", "Ada", "Racket",
                                  "Julia", "Shell", "Bash", "Guile", "Nim", "Dart", "Swift", "Smalltalk", "Prolog",
                                  "Clojure", "Objective-C", "Assembly", "Coq", "Standard ML", "D", "R"};
    std::stable_sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.size() > b.size(); });
    return v;
  }();
  const std::string key = "written in ";
  for (size_t at = 0; (at = s.find(key, at)) != std::string::npos; ++at) {
    if (at > 0 && is_word_char(s[at - 1])) continue;
    const size_t b = at + key.size();
    for (const std::string& l : langs)
      if (s.compare(b, l.size(), l) == 0 && (b + l.size() == s.size() || !is_word_char(s[b + l.size()])))
        return {b, l};
  }
  return {std::string::npos, ""};
}

}  // namespace

std::string qa_context(const QaPackage& p) {
  std::string c = "Package: " + p.package + "\n";
  if (!p.source.empty() && p.source != p.package) c += "Source: " + p.source + "\n";
  c += "Version: " + p.version + "\nMaintainer: " + p.maintainer + "\nSection: " + p.section + "\n";
  if (!p.homepage.empty()) c += "Homepage: " + p.homepage + "\n";
  c += "Description: " + p.summary + "\n" + p.description;
  return c;
}

std::string qa_rule_of(const std::string& id) {
  const size_t slash = id.rfind('/');
  return slash == std::string::npos ? "" : id.substr(slash + 1);
}

std::vector<QaExample> qa_questions(const QaPackage& p) {
  const std::string ctx = qa_context(p);
  std::vector<QaExample> out;
  auto add = [&](const char* rule, const std::string& question, size_t byte_at, const std::string& answer) {
    if (answer.empty() || byte_at == std::string::npos) return;
    QKV_CHECK(ctx.compare(byte_at, answer.size(), answer) == 0, "qa-debian", "rule ", rule, " for ", p.package,
              ": the context does not hold the answer at byte ", byte_at);
    QaExample e;
    e.id = p.package + "/" + rule;
    e.question = question;
    e.context = ctx;
    e.answers.push_back({answer, text::utf8_char_offset(ctx, int64_t(byte_at)), int64_t(byte_at),
                         int64_t(byte_at + answer.size())});
    out.push_back(std::move(e));
  };
  // A field's value: the text after "\nName: " (the first line has no newline before it).
  auto field_at = [&](const std::string& name) {
    const size_t at = ctx.find("\n" + name + ": ");
    return at == std::string::npos ? at : at + name.size() + 3;
  };
  const std::string& X = p.package;
  add("version", "Which version of " + X + " is this?", field_at("Version"), p.version);
  if (const size_t lt = p.maintainer.find(" <"); lt != std::string::npos) {
    std::string name = p.maintainer.substr(0, lt);
    while (!name.empty() && name.back() == ' ') name.pop_back();
    if (name.size() >= 2 && name.front() != '"') add("maintainer", "Who maintains " + X + "?", field_at("Maintainer"), name);
    const size_t gt = p.maintainer.find('>', lt);
    if (gt != std::string::npos && gt > lt + 2 && p.maintainer.find('@', lt) < gt)
      add("maintainer_email", "What is the e-mail address of " + X + "'s maintainer?", field_at("Maintainer") + lt + 2,
          p.maintainer.substr(lt + 2, gt - lt - 2));
  }
  add("section", "What section is " + X + " in?", field_at("Section"), p.section);
  if (!p.homepage.empty()) add("homepage", "What is the homepage of " + X + "?", field_at("Homepage"), p.homepage);
  if (!p.source.empty() && p.source != p.package)
    add("source", "Which source package is " + X + " built from?", field_at("Source"), p.source);
  add("summary", "What is " + X + " in one line?", field_at("Description"), p.summary);
  const size_t desc_at = ctx.size() - p.description.size();
  if (auto [at, url] = first_url(p.description); !url.empty())
    add("description_url", "Which web address does the description of " + X + " mention?", desc_at + at, url);
  if (auto [at, lang] = written_in(p.description); !lang.empty())
    add("written_in", "What programming language is " + X + " written in?", desc_at + at, lang);
  return out;
}

BuildResult build_qa_corpus(const QaCorpusOptions& qo) {
  const ExtraBuildOptions& opt = qo.build;
  const auto t0 = std::chrono::steady_clock::now();
  BuildResult res;
  res.out_dir = opt.data_dir + "/qa/debian";
  const double valid_frac = 0.1, test_frac = 0.1;
  const nlohmann::json key = {{"builder", "qkv qa-debian corpus v1"}, {"indexes", description_indexes_key()},
                              {"valid_frac", valid_frac}, {"test_frac", test_frac}, {"seed", opt.seed},
                              {"max_packages", qo.max_packages}};
  const std::vector<std::string> outputs = {"train.jsonl", "valid.jsonl", "test.jsonl", "stats.json"};
  if (reuse_build(res, key, outputs, opt.force)) return res;
  const DescriptionIndexes idx = fetch_description_indexes(opt.cache_dir, opt.verbose);
  const auto long_desc = long_descriptions(idx.translations);  // Description-md5 -> long text
  std::vector<QaPackage> packages;
  uint64_t skipped = 0;
  for (auto& rec : parse_deb822(read_compressed(idx.packages))) {
    QaPackage p;
    p.package = rec["Package"];
    p.source = source_package(rec);  // the package itself when it has no Source field
    p.version = rec["Version"];
    p.maintainer = normalize_whitespace(to_utf8(rec["Maintainer"]));
    p.section = rec["Section"];
    p.homepage = normalize_whitespace(to_utf8(rec["Homepage"]));
    p.summary = normalize_whitespace(to_utf8(rec["Description"]));
    auto it = long_desc.find(rec["Description-md5"]);
    if (p.package.empty() || p.version.empty() || p.maintainer.empty() || p.section.empty() || p.summary.empty() ||
        it == long_desc.end() || it->second.empty()) {
      ++skipped;
      continue;
    }
    p.description = it->second;
    packages.push_back(std::move(p));
  }
  const size_t available = packages.size();
  if (qo.max_packages > 0 && int64_t(packages.size()) > qo.max_packages) {  // a seeded sample by name
    std::stable_sort(packages.begin(), packages.end(), [&](const QaPackage& a, const QaPackage& b) {
      return group_key(a.package, opt.seed) < group_key(b.package, opt.seed);
    });
    packages.resize(size_t(qo.max_packages));
    std::stable_sort(packages.begin(), packages.end(),
                     [](const QaPackage& a, const QaPackage& b) { return a.package < b.package; });
  }
  std::vector<std::string> sources;
  for (auto& p : packages) sources.push_back(p.source);
  const auto split_of = split_groups(sources, valid_frac, test_frac, opt.seed);
  SplitTexts splits;
  std::map<std::string, uint64_t> rules[3];
  uint64_t contexts[3] = {0, 0, 0};
  for (size_t i = 0; i < packages.size(); ++i) {
    const Split s = split_of.at(sources[i]);
    ++contexts[int(s)];
    for (const QaExample& e : qa_questions(packages[i])) {
      splits.add(s, qa_example_json(e), e.question + " " + e.answers[0].text);
      ++rules[int(s)][qa_rule_of(e.id)];
    }
  }
  fs::create_directories(res.out_dir);
  nlohmann::json stats = {{"name", "qa-debian"}, {"packages_available", available}, {"packages", packages.size()},
                          {"skipped_without_fields_or_long_description", skipped},
                          {"source_packages", split_of.size()}};
  write_splits(res.out_dir, "jsonl", splits, stats, [&](Split s, nlohmann::json& entry) {
    entry["classes"] = rules[int(s)];  // examples per rule
    entry["contexts"] = contexts[int(s)];
  });
  finish_build(res.out_dir, stats, key, t0);
  res.stats = stats;
  res.built = true;
  return res;
}

}  // namespace qkv::data
