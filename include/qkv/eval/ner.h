// qkv/eval/ner.h - entity-level precision/recall/F1 over BIO/IOB2 (also IOBES) tag sequences,
// with seqeval's default (conlleval-compatible) chunking: an entity starts at B-/S-, at an I-/E-
// that follows O or another type, and ends before O, B-, S- or a type change.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace qkv::eval {

struct Entity {
  std::string type;
  int begin = 0, end = 0;  // token range [begin, end) within its sentence
  bool operator==(const Entity& o) const {
    return type == o.type && begin == o.begin && end == o.end;
  }
  bool operator<(const Entity& o) const;
};

// Entities of one sentence's tags ("O", "B-PER", "I-PER", ...).
std::vector<Entity> bio_entities(const std::vector<std::string>& tags);

struct NerScores {
  double precision = 0, recall = 0, f1 = 0;  // micro over all entities, 0..1
  int64_t n_pred = 0, n_gold = 0, n_correct = 0;
  struct PerType {
    double precision = 0, recall = 0, f1 = 0;
    int64_t support = 0;  // gold entities of the type
  };
  std::map<std::string, PerType> per_type;
};

// pred[i] and gold[i] are the tags of sentence i (same lengths, else qkv::Error).
NerScores ner_scores(const std::vector<std::vector<std::string>>& pred,
                     const std::vector<std::vector<std::string>>& gold);

}  // namespace qkv::eval
