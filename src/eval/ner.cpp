// Entity-level NER scores (seqeval default mode chunking).
#include "qkv/eval/ner.h"

#include <algorithm>
#include <array>
#include <set>
#include <tuple>

#include "qkv/util/error.h"

namespace qkv::eval {
namespace {

// "B-PER" -> ('B', "PER"); "O" -> ('O', ""); a tag without '-' has no type.
std::pair<char, std::string> split_tag(const std::string& t) {
  if (t.empty() || t == "O") return {'O', ""};
  const size_t dash = t.find('-');
  return {t[0], dash == std::string::npos ? std::string() : t.substr(dash + 1)};
}

bool ends_chunk(char prev, char cur, const std::string& pt, const std::string& ct) {
  if (prev == 'E' || prev == 'S') return true;
  if ((prev == 'B' || prev == 'I') && (cur == 'B' || cur == 'S' || cur == 'O')) return true;
  return prev != 'O' && pt != ct;
}

bool starts_chunk(char prev, char cur, const std::string& pt, const std::string& ct) {
  if (cur == 'B' || cur == 'S') return true;
  if ((prev == 'E' || prev == 'S' || prev == 'O') && (cur == 'E' || cur == 'I')) return true;
  return cur != 'O' && pt != ct;
}

double ratio(int64_t a, int64_t b) { return b > 0 ? double(a) / double(b) : 0.0; }
double f1(double p, double r) { return p + r > 0 ? 2 * p * r / (p + r) : 0.0; }

}  // namespace

bool Entity::operator<(const Entity& o) const {
  return std::tie(begin, end, type) < std::tie(o.begin, o.end, o.type);
}

std::vector<Entity> bio_entities(const std::vector<std::string>& tags) {
  std::vector<Entity> out;
  char prev = 'O';
  std::string ptype;
  int begin = 0;
  const int n = int(tags.size());
  for (int i = 0; i <= n; ++i) {  // a trailing "O" closes the last entity
    auto [cur, ctype] = i < n ? split_tag(tags[i]) : std::make_pair('O', std::string());
    if (ends_chunk(prev, cur, ptype, ctype) && prev != 'O') out.push_back({ptype, begin, i});
    if (starts_chunk(prev, cur, ptype, ctype)) begin = i;
    prev = cur;
    ptype = ctype;
  }
  return out;
}

NerScores ner_scores(const std::vector<std::vector<std::string>>& pred,
                     const std::vector<std::vector<std::string>>& gold) {
  QKV_CHECK(pred.size() == gold.size(), "ner_scores", "expected as many predicted as gold ",
            "sentences, got ", pred.size(), " and ", gold.size());
  NerScores s;
  std::map<std::string, std::array<int64_t, 3>> by_type;  // pred, gold, correct
  for (size_t i = 0; i < gold.size(); ++i) {
    QKV_CHECK(pred[i].size() == gold[i].size(), "ner_scores", "sentence ", i, ": ",
              pred[i].size(), " predicted tags for ", gold[i].size(), " gold tags");
    auto pe = bio_entities(pred[i]), ge = bio_entities(gold[i]);
    std::set<Entity> gs(ge.begin(), ge.end());
    for (auto& e : pe) {
      ++by_type[e.type][0];
      if (gs.count(e)) ++by_type[e.type][2], ++s.n_correct;
    }
    for (auto& e : ge) ++by_type[e.type][1];
    s.n_pred += int64_t(pe.size());
    s.n_gold += int64_t(ge.size());
  }
  s.precision = ratio(s.n_correct, s.n_pred);
  s.recall = ratio(s.n_correct, s.n_gold);
  s.f1 = f1(s.precision, s.recall);
  for (auto& [type, c] : by_type) {
    NerScores::PerType t;
    t.precision = ratio(c[2], c[0]);
    t.recall = ratio(c[2], c[1]);
    t.f1 = f1(t.precision, t.recall);
    t.support = c[1];
    s.per_type[type] = t;
  }
  return s;
}

}  // namespace qkv::eval
