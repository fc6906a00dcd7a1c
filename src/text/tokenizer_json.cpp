#include "qkv/text/tokenizer_json.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include "qkv/text/bpe.h"
#include "qkv/text/bpe_train.h"
#include "qkv/text/char_word.h"
#include "qkv/text/wordpiece.h"
#include "qkv/util/error.h"
#include "qkv/util/error_context.h"
#include "qkv/util/file.h"

namespace qkv::text {

// std::map-backed: ordered_json is quadratic on 50k-entry vocabularies.
using json = nlohmann::json;

namespace {

json vocab_object(const std::vector<std::string>& vocab) {
  json v = json::object();
  for (size_t i = 0; i < vocab.size(); ++i) v[vocab[i]] = i;
  return v;
}

json template_json(const std::vector<TemplatePiece>& t) {
  json a = json::array();
  for (auto& p : t) {
    if (p.is_sequence) a.push_back({{"Sequence", {{"id", p.sequence ? "B" : "A"}, {"type_id", p.type_id}}}});
    else a.push_back({{"SpecialToken", {{"id", p.token}, {"type_id", p.type_id}}}});
  }
  return a;
}

// Field access with errors that name the file and the dotted field.
struct Reader {
  std::string where;
  const json& get(const json& obj, const std::string& path, const char* key) const {
    QKV_CHECK(obj.is_object() && obj.contains(key), "tokenizer.json " + where,
              "missing field '", path.empty() ? key : path + "." + key, "'");
    return obj[key];
  }
  std::string str(const json& obj, const std::string& path, const char* key) const {
    const json& v = get(obj, path, key);
    QKV_CHECK(v.is_string(), "tokenizer.json " + where, "field '", path + "." + key,
              "': expected a string, got ", v.type_name());
    return v.get<std::string>();
  }
  std::string opt_str(const json& obj, const std::string& path, const char* key) const {
    if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) return "";
    return str(obj, path, key);
  }
  std::vector<std::string> vocab(const json& model) const {
    const json& v = get(model, "model", "vocab");
    QKV_CHECK(v.is_object(), "tokenizer.json " + where, "field 'model.vocab': expected an object, got ",
              v.type_name());
    std::vector<std::string> out(v.size());
    std::vector<bool> seen(v.size());
    for (auto& [tok, id] : v.items()) {
      QKV_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < int64_t(v.size()),
                "tokenizer.json " + where, "field 'model.vocab.", tok, "': expected an id in [0, ",
                v.size(), "), got ", id.dump());
      int64_t i = id.get<int64_t>();
      QKV_CHECK(!seen[i], "tokenizer.json " + where, "field 'model.vocab': id ", i, " used twice");
      seen[i] = true;
      out[i] = tok;
    }
    return out;
  }
};

// True if the pre_tokenizer (or a Sequence of them) contains one of `type`.
bool has_type(const json& j, const std::string& type) {
  if (!j.is_object()) return false;
  if (j.value("type", "") == type) return true;
  for (const char* k : {"pretokenizers", "decoders", "normalizers"})
    if (j.contains(k) && j[k].is_array())
      for (auto& x : j[k])
        if (has_type(x, type)) return true;
  return false;
}

// A pre_tokenizer or decoder (or a Sequence of them) whose every type is one of `allowed`, the ones
// this model's tokenizer implements: another type (a typo, or Whitespace, which splits off
// punctuation) would load and then tokenize differently without a word.
void check_types(const Reader& r, const json& j, const std::string& field, const std::vector<std::string>& allowed,
                 const std::string& model) {
  if (j.is_null()) return;
  const std::string file = "tokenizer.json " + r.where;
  QKV_CHECK(j.is_object(), file, "field '", field, "': expected an object or null, got ", j.type_name());
  const auto t = j.find("type");
  QKV_CHECK(t != j.end() && t->is_string(), file, "field '", field, ".type': expected a string");
  const std::string type = t->get<std::string>();
  if (type == "Sequence") {
    for (const char* key : {"pretokenizers", "decoders"})
      if (j.contains(key)) {
        QKV_CHECK(j[key].is_array(), file, "field '", field, ".", key, "': expected an array");
        for (size_t i = 0; i < j[key].size(); ++i)
          check_types(r, j[key][i], field + "." + key + "[" + std::to_string(i) + "]", allowed, model);
      }
    return;
  }
  std::string expected;
  for (const std::string& a : allowed) expected += (expected.empty() ? "" : " or ") + a;
  QKV_CHECK(std::find(allowed.begin(), allowed.end(), type) != allowed.end(), file, "field '", field, ".type': '",
            type, "' is not one that qkv's ", model, " reads: expected ", expected, " (or no ", field, ")");
}

std::vector<TemplatePiece> parse_template(const Reader& r, const json& a, const std::string& field) {
  QKV_CHECK(a.is_array(), "tokenizer.json " + r.where, "field '", field, "': expected an array");
  std::vector<TemplatePiece> out;
  for (auto& x : a) {
    TemplatePiece p;
    if (x.contains("Sequence")) {
      p.is_sequence = true;
      std::string id = r.str(x["Sequence"], field + ".Sequence", "id");
      QKV_CHECK(id == "A" || id == "B", "tokenizer.json " + r.where, "field '", field,
                ".Sequence.id': expected A or B, got '", id, "'");
      p.sequence = id == "B";
      p.type_id = x["Sequence"].value("type_id", 0);
    } else if (x.contains("SpecialToken")) {
      p.token = r.str(x["SpecialToken"], field + ".SpecialToken", "id");
      p.type_id = x["SpecialToken"].value("type_id", 0);
    } else {
      fail("tokenizer.json " + r.where, "field '", field, "': expected Sequence or SpecialToken, got ",
           x.dump());
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

std::string to_tokenizer_json(const Tokenizer& tok) {
  json root;
  root["version"] = "1.0";
  root["truncation"] = nullptr;
  root["padding"] = nullptr;
  json added = json::array();
  for (auto& [content, id] : tok.added_tokens())
    added.push_back({{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  root["added_tokens"] = added;
  root["normalizer"] = nullptr;
  root["pre_tokenizer"] = nullptr;
  root["post_processor"] = nullptr;
  root["decoder"] = nullptr;
  if (auto* b = dynamic_cast<const BpeTokenizer*>(&tok)) {
    const BpeOptions& o = b->options();
    if (o.byte_level) {
      json bl = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
      root["pre_tokenizer"] = bl;
      root["decoder"] = bl;
    } else {
      root["pre_tokenizer"] = {{"type", "WhitespaceSplit"}};
      root["decoder"] = {{"type", "BPEDecoder"}, {"suffix", o.end_of_word_suffix}};
    }
    json merges = json::array();
    for (auto& [l, r] : b->merges()) merges.push_back(json::array({l, r}));
    root["model"] = {{"type", "BPE"}, {"dropout", nullptr},
                     {"unk_token", o.unk_token.empty() ? json() : json(o.unk_token)},
                     {"continuing_subword_prefix", nullptr},
                     {"end_of_word_suffix", o.end_of_word_suffix.empty() ? json() : json(o.end_of_word_suffix)},
                     {"fuse_unk", false}, {"byte_fallback", false},
                     {"vocab", vocab_object(b->vocab())}, {"merges", merges}};
  } else if (auto* w = dynamic_cast<const WordPieceTokenizer*>(&tok)) {
    const WordPieceOptions& o = w->options();
    root["normalizer"] = {{"type", "BertNormalizer"}, {"clean_text", o.normalize.clean_text},
                          {"handle_chinese_chars", o.normalize.handle_chinese_chars},
                          {"strip_accents", o.normalize.strip_accents}, {"lowercase", o.normalize.lowercase}};
    root["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
    root["decoder"] = {{"type", "WordPiece"}, {"prefix", o.continuing_subword_prefix}, {"cleanup", true}};
    root["model"] = {{"type", "WordPiece"}, {"unk_token", o.unk_token},
                     {"continuing_subword_prefix", o.continuing_subword_prefix},
                     {"max_input_chars_per_word", o.max_input_chars_per_word},
                     {"vocab", vocab_object(w->vocab())}};
  } else if (auto* v = dynamic_cast<const VocabTokenizer*>(&tok)) {
    if (v->level() == VocabTokenizer::Level::Word) {
      root["pre_tokenizer"] = {{"type", "WhitespaceSplit"}};
    } else {
      root["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "."}}},
                               {"behavior", "Isolated"}, {"invert", false}};
      root["decoder"] = {{"type", "Fuse"}};
    }
    root["model"] = {{"type", "WordLevel"}, {"vocab", vocab_object(v->vocab())}, {"unk_token", v->unk_token()}};
  } else {
    fail("tokenizer.json", "cannot save a tokenizer of kind '", tok.kind(), "'");
  }
  const PostTemplate& t = tok.post_template();
  if (!t.empty()) {
    json specials = json::object();
    for (auto& s : t.special_tokens()) {
      int32_t id = *tok.token_to_id(s);
      specials[s] = {{"id", s}, {"ids", {id}}, {"tokens", {s}}};
    }
    root["post_processor"] = {{"type", "TemplateProcessing"}, {"single", template_json(t.single)},
                              {"pair", template_json(t.pair)}, {"special_tokens", specials}};
  }
  // qkv extension (Hugging Face ignores unknown keys): which token plays which role.
  json roles = json::object();
  for (auto& [r, s] : tok.special_tokens().tokens) roles[role_name(r)] = s;
  root["qkv_special_roles"] = roles;
  return root.dump(2);
}

namespace {
std::unique_ptr<Tokenizer> parse_tokenizer_json(const std::string& text, const std::string& where) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    fail("tokenizer.json " + where, "invalid JSON: ", e.what());
  }
  Reader r{where};
  QKV_CHECK(root.is_object(), "tokenizer.json " + where, "expected a JSON object at the top, got ",
            root.type_name());
  const json& model = r.get(root, "", "model");
  std::string type = r.str(model, "model", "type");
  const json pre = root.value("pre_tokenizer", json());
  const json dec = root.value("decoder", json());
  std::unique_ptr<Tokenizer> tok;
  if (type == "BPE") {
    BpeOptions o;
    o.byte_level = has_type(pre, "ByteLevel") || has_type(dec, "ByteLevel");
    const std::string kind = o.byte_level ? "byte-level BPE" : "word-level BPE";
    check_types(r, pre, "pre_tokenizer", {o.byte_level ? "ByteLevel" : "WhitespaceSplit"}, kind);
    check_types(r, dec, "decoder", {o.byte_level ? "ByteLevel" : "BPEDecoder"}, kind);
    o.end_of_word_suffix = r.opt_str(model, "model", "end_of_word_suffix");
    o.unk_token = r.opt_str(model, "model", "unk_token");
    QKV_CHECK(r.opt_str(model, "model", "continuing_subword_prefix").empty(), "tokenizer.json " + where,
              "field 'model.continuing_subword_prefix': not supported by qkv's BPE, expected null");
    const json& m = r.get(model, "model", "merges");
    QKV_CHECK(m.is_array(), "tokenizer.json " + where, "field 'model.merges': expected an array, got ",
              m.type_name());
    std::vector<BpeTokenizer::Merge> merges;
    merges.reserve(m.size());
    for (size_t i = 0; i < m.size(); ++i) {
      const json& x = m[i];
      if (x.is_string()) {
        std::string s = x.get<std::string>();
        size_t sp = s.find(' ');
        QKV_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < s.size() && s.find(' ', sp + 1) == std::string::npos,
                  "tokenizer.json " + where, "field 'model.merges[", i, "]': expected 'left right', got '", s, "'");
        merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else {
        QKV_CHECK(x.is_array() && x.size() == 2 && x[0].is_string() && x[1].is_string(),
                  "tokenizer.json " + where, "field 'model.merges[", i,
                  "]': expected [left, right] or 'left right', got ", x.dump());
        merges.emplace_back(x[0].get<std::string>(), x[1].get<std::string>());
      }
    }
    tok = std::make_unique<BpeTokenizer>(r.vocab(model), std::move(merges), o);
  } else if (type == "WordPiece") {
    check_types(r, pre, "pre_tokenizer", {"BertPreTokenizer"}, "WordPiece");
    check_types(r, dec, "decoder", {"WordPiece"}, "WordPiece");
    WordPieceOptions o;
    o.unk_token = r.str(model, "model", "unk_token");
    if (model.contains("continuing_subword_prefix")) o.continuing_subword_prefix = r.str(model, "model", "continuing_subword_prefix");
    if (model.contains("max_input_chars_per_word")) {  // get<int>() wrapped 2^32 + 1 to 1: every word was [UNK]
      const json& m = model["max_input_chars_per_word"];
      QKV_CHECK(m.is_number_integer() && m.get<int64_t>() >= 1 && m.get<int64_t>() <= std::numeric_limits<int>::max(),
                "tokenizer.json " + where, "field 'model.max_input_chars_per_word': expected an integer in [1, ",
                std::numeric_limits<int>::max(), "], got ", m.dump());
      o.max_input_chars_per_word = m.get<int>();
    }
    const json norm = root.value("normalizer", json());
    if (norm.is_object() && norm.value("type", "") == "BertNormalizer") {
      o.normalize.clean_text = norm.value("clean_text", true);
      o.normalize.handle_chinese_chars = norm.value("handle_chinese_chars", true);
      o.normalize.lowercase = norm.value("lowercase", true);
      const json& sa = norm.contains("strip_accents") ? norm["strip_accents"] : json();
      o.normalize.strip_accents = sa.is_boolean() ? sa.get<bool>() : o.normalize.lowercase;
    } else {
      QKV_CHECK(norm.is_null(), "tokenizer.json " + where, "field 'normalizer.type': expected BertNormalizer or null, got ",
                norm.dump());
      o.normalize.lowercase = o.normalize.strip_accents = false;
    }
    tok = std::make_unique<WordPieceTokenizer>(r.vocab(model), o);
  } else if (type == "WordLevel") {
    check_types(r, pre, "pre_tokenizer", {"WhitespaceSplit", "Split"}, "WordLevel");
    const bool chars = pre.is_object() && pre.value("type", "") == "Split";
    const json one_char = {{"Regex", "."}};
    QKV_CHECK(!chars || pre.value("pattern", json()) == one_char, "tokenizer.json " + where,
              "field 'pre_tokenizer.pattern': qkv's character-level WordLevel splits on {\"Regex\": \".\"}, got ",
              pre.value("pattern", json()).dump());
    tok = std::make_unique<VocabTokenizer>(chars ? VocabTokenizer::Level::Char : VocabTokenizer::Level::Word,
                                           r.vocab(model), r.str(model, "model", "unk_token"));
  } else {
    fail("tokenizer.json " + where, "field 'model.type': expected BPE, WordPiece or WordLevel, got '", type, "'");
  }
  // Added tokens, then roles (qkv's own record, else guessed from the names), then the template.
  if (root.contains("added_tokens")) {
    const json& at = root["added_tokens"];
    QKV_CHECK(at.is_array(), "tokenizer.json " + where, "field 'added_tokens': expected an array");
    for (size_t i = 0; i < at.size(); ++i) {
      std::string content = r.str(at[i], "added_tokens[" + std::to_string(i) + "]", "content");
      auto id = tok->token_to_id(content);
      const json& id_field = r.get(at[i], "added_tokens[" + std::to_string(i) + "]", "id");
      QKV_CHECK(id_field.is_number_integer(), "tokenizer.json " + where, "field 'added_tokens[", i,
                "].id': expected an integer, got ", id_field.dump());
      const int64_t want = id_field.get<int64_t>();
      QKV_CHECK(id ? *id == want : want == tok->vocab_size(), "tokenizer.json " + where,
                "field 'added_tokens[", i, "].id': '", content, "' expected id ",
                id ? *id : tok->vocab_size(), ", found ", want);
      tok->add_special_token(content);
    }
  }
  if (root.contains("qkv_special_roles") && root["qkv_special_roles"].is_object()) {
    for (auto& [name, t] : root["qkv_special_roles"].items()) {
      QKV_CHECK(t.is_string(), "tokenizer.json " + where, "field 'qkv_special_roles.", name,
                "': expected the token's text (a string), got ", t.dump());
      tok->set_special(role_from_name(name), t.get<std::string>());
    }
  } else {
    for (auto& [content, id] : tok->added_tokens()) {
      Role role;
      if (guess_role(content, role)) tok->set_special(role, content);
    }
  }
  const json pp = root.value("post_processor", json());
  if (pp.is_object()) {
    std::string pt = r.str(pp, "post_processor", "type");
    if (pt == "TemplateProcessing") {
      PostTemplate t;
      t.single = parse_template(r, r.get(pp, "post_processor", "single"), "post_processor.single");
      t.pair = parse_template(r, r.get(pp, "post_processor", "pair"), "post_processor.pair");
      tok->set_template(t);
    } else if (pt == "BertProcessing" || pt == "RobertaProcessing") {
      // "cls" and "sep" are [token, id] pairs. Indexed unchecked (a const json's operator[] on a
      // missing key or an empty array is undefined), a file without them crashed the program.
      auto token_of = [&](const char* key) {
        const json& v = r.get(pp, "post_processor", key);
        QKV_CHECK(v.is_array() && !v.empty() && v[0].is_string(), "tokenizer.json " + where, "field 'post_processor.",
                  key, "': expected [token, id], got ",
                  v.is_array() ? "an array without a token first" : v.type_name());
        return v[0].get<std::string>();
      };
      const std::string cls = token_of("cls"), sep = token_of("sep");
      if (pt == "BertProcessing")
        tok->set_template(PostTemplate::parse(cls + " $A " + sep, cls + ":0 $A:0 " + sep + ":0 $B:1 " + sep + ":1"));
      else
        tok->set_template(PostTemplate::parse(cls + " $A " + sep, cls + " $A:0 " + sep + " " + sep + " $B:0 " + sep));
    } else if (pt != "ByteLevel") {
      fail("tokenizer.json " + where, "field 'post_processor.type': expected TemplateProcessing, "
           "BertProcessing, RobertaProcessing or ByteLevel, got '", pt, "'");
    }
  }
  return tok;
}

}  // namespace

std::unique_ptr<Tokenizer> from_tokenizer_json(const std::string& text, const std::string& where) {
  try {
    return with_context(where, [&] { return parse_tokenizer_json(text, where); });
  } catch (const json::exception& e) {  // a field of the wrong JSON type deep inside
    fail("tokenizer.json " + where, "unexpected JSON content: ", e.what());
  }
}

std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path) {
  auto tok = from_tokenizer_json(read_file(path), path);
  tok->set_source(path);
  return tok;
}

void Tokenizer::save(const std::string& path) const { write_file_atomic(path, to_tokenizer_json(*this) + "\n"); }

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  struct stat st;
  QKV_CHECK(::stat(path.c_str(), &st) == 0, "load_tokenizer", "'", path, "' does not exist");
  auto exists = [](const std::string& p) {
    struct stat s;
    return ::stat(p.c_str(), &s) == 0;
  };
  auto ends_with = [&](const std::string& suf) {
    return path.size() >= suf.size() && path.compare(path.size() - suf.size(), suf.size(), suf) == 0;
  };
  if (S_ISDIR(st.st_mode)) {
    std::string d = path.back() == '/' ? path : path + "/";
    if (exists(d + "tokenizer.json")) return load_tokenizer_json(d + "tokenizer.json");
    if (exists(d + "encoder.json") && exists(d + "vocab.bpe"))
      return BpeTokenizer::load_gpt2(d + "encoder.json", d + "vocab.bpe");
    if (exists(d + "vocab.txt")) return WordPieceTokenizer::load_vocab_txt(d + "vocab.txt");
    fail("load_tokenizer", "directory '", path,
         "' has no tokenizer.json, encoder.json + vocab.bpe, or vocab.txt");
  }
  if (ends_with(".txt")) return WordPieceTokenizer::load_vocab_txt(path);
  return load_tokenizer_json(path);
}

}  // namespace qkv::text
