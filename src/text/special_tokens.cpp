#include "qkv/text/special_tokens.h"

#include <algorithm>

#include "qkv/util/error.h"

namespace qkv::text {

namespace {
constexpr const char* kRoleNames[] = {"pad", "unk", "cls",   "sep",   "mask",
                                      "bos", "eos", "start", "delim", "extract"};

std::vector<TemplatePiece> parse_pieces(std::string_view s, bool pair_template) {
  std::vector<TemplatePiece> out;
  int cur_type = 0;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    if (i == s.size()) break;
    size_t j = s.find(' ', i);
    if (j == std::string_view::npos) j = s.size();
    std::string_view w = s.substr(i, j - i);
    i = j;
    TemplatePiece p;
    std::string_view name = w;
    int type = -1;
    size_t colon = w.rfind(':');
    if (colon != std::string_view::npos && colon + 1 < w.size() &&
        std::all_of(w.begin() + colon + 1, w.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      name = w.substr(0, colon);
      type = std::stoi(std::string(w.substr(colon + 1)));
    }
    if (name == "$A" || name == "$B" || name == "$") {
      p.is_sequence = true;
      p.sequence = name == "$B" ? 1 : 0;
      QKV_CHECK(pair_template || p.sequence == 0, "text template",
                "single-sequence template may not use $B, got '", std::string(s), "'");
      p.type_id = type >= 0 ? type : p.sequence;
      cur_type = p.type_id;
    } else {
      p.token = std::string(name);
      p.type_id = type >= 0 ? type : cur_type;
    }
    out.push_back(std::move(p));
  }
  return out;
}
}  // namespace

const char* role_name(Role r) { return kRoleNames[int(r)]; }

Role role_from_name(std::string_view name) {
  for (int i = 0; i < 10; ++i)
    if (name == kRoleNames[i]) return Role(i);
  fail("text special tokens", "unknown role '", std::string(name),
       "', expected pad|unk|cls|sep|mask|bos|eos|start|delim|extract");
}

SpecialTokens SpecialTokens::bert() {
  return {{{Role::Pad, "[PAD]"}, {Role::Unk, "[UNK]"}, {Role::Cls, "[CLS]"}, {Role::Sep, "[SEP]"},
           {Role::Mask, "[MASK]"}}};
}
SpecialTokens SpecialTokens::gpt2() {
  return {{{Role::Bos, "<|endoftext|>"}, {Role::Eos, "<|endoftext|>"}, {Role::Unk, "<|endoftext|>"}}};
}
SpecialTokens SpecialTokens::seq2seq() {
  return {{{Role::Pad, "<pad>"}, {Role::Unk, "<unk>"}, {Role::Bos, "<s>"}, {Role::Eos, "</s>"}}};
}
SpecialTokens SpecialTokens::gpt_finetune() {
  return {{{Role::Pad, "[PAD]"}, {Role::Unk, "[UNK]"}, {Role::Start, "[START]"},
           {Role::Delim, "[DELIM]"}, {Role::Extract, "[EXTRACT]"}}};
}
std::vector<std::string> SpecialTokens::distinct() const {
  std::vector<std::string> out;
  for (auto& [r, t] : tokens)
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  return out;
}

PostTemplate PostTemplate::parse(std::string_view single, std::string_view pair) {
  PostTemplate t;
  t.single = parse_pieces(single, false);
  t.pair = parse_pieces(pair, true);
  return t;
}
PostTemplate PostTemplate::bert() {
  return parse("[CLS] $A [SEP]", "[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1");
}
PostTemplate PostTemplate::roberta() {
  return parse("<s> $A </s>", "<s>:0 $A:0 </s>:0 </s>:0 $B:0 </s>:0");
}
PostTemplate PostTemplate::bos_eos() { return parse("<s> $A </s>", "<s>:0 $A:0 </s>:0 $B:1 </s>:1"); }
PostTemplate PostTemplate::gpt_finetune() {
  return parse("[START] $A [EXTRACT]", "[START]:0 $A:0 [DELIM]:0 $B:1 [EXTRACT]:1");
}

std::vector<std::string> PostTemplate::special_tokens() const {
  std::vector<std::string> out;
  for (const auto* v : {&single, &pair})
    for (auto& p : *v)
      if (!p.is_sequence && std::find(out.begin(), out.end(), p.token) == out.end())
        out.push_back(p.token);
  return out;
}

std::string PostTemplate::to_string(bool for_pair) const {
  std::string s;
  for (auto& p : for_pair ? pair : single) {
    if (!s.empty()) s += ' ';
    s += p.is_sequence ? (p.sequence ? "$B" : "$A") : p.token;
    s += ":" + std::to_string(p.type_id);
  }
  return s;
}

}  // namespace qkv::text
