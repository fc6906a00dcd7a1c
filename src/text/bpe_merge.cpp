// BPE's merge loop over one pre-token's symbols, two ways with the same result (bpe.h): rescanning
// every adjacent pair per merge, and a priority queue of pairs for long pre-tokens.
#include <algorithm>
#include <queue>
#include <set>

#include "qkv/text/bpe.h"

namespace qkv::text {

void BpeTokenizer::merge_by_scan(std::vector<int32_t>& w) const {
  while (w.size() > 1) {
    // Lowest-rank adjacent pair; on equal rank the later position (gpt-3-encoder keeps the last
    // pair it sees for a rank; without the quirk, equal rank means the same pair anyway).
    int32_t best_rank = INT32_MAX, first = -1, second = -1, result = -1;
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      auto it = merge_of_.find(key(w[i], w[i + 1]));
      if (it != merge_of_.end() && it->second.rank <= best_rank) {
        best_rank = it->second.rank;
        first = w[i], second = w[i + 1], result = it->second.result;
      }
    }
    if (first < 0) break;
    size_t o = 0;
    for (size_t i = 0; i < w.size();) {
      if (i + 1 < w.size() && w[i] == first && w[i + 1] == second) {
        w[o++] = result;
        i += 2;
      } else {
        w[o++] = w[i++];
      }
    }
    w.resize(o);
  }
}

// The same merges in the same order as merge_by_scan, in O(n log n): the symbols form a linked list
// whose nodes keep their first index (so list order is index order); every adjacent pair that is a
// merge is in its pair's set of left nodes; a min-queue of ranks says which pair is next. One round
// merges all occurrences of one pair, left to right, as they stood when the round began: a merge's
// result is never one of its own parts (its text is longer), so a round creates no new occurrence
// of its pair, exactly as the scan's single pass over the old symbols.
void BpeTokenizer::merge_by_queue(std::vector<int32_t>& w) const {
  const int32_t n = int32_t(w.size());
  if (n < 2) return;
  std::vector<int32_t> next(w.size()), prev(w.size());
  for (int32_t i = 0; i < n; ++i) next[i] = i + 1 < n ? i + 1 : -1, prev[i] = i - 1;
  std::unordered_map<uint64_t, std::set<int32_t>> at;  // pair -> its left nodes
  using Entry = std::pair<int32_t, uint64_t>;           // (rank, pair); stale entries are skipped
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
  // The merge of node i and its successor, if that pair is one.
  const auto merge_at = [&](int32_t i, uint64_t& pair) -> const MergeInfo* {
    if (i < 0 || next[i] < 0) return nullptr;
    pair = key(w[i], w[next[i]]);
    auto it = merge_of_.find(pair);
    return it == merge_of_.end() ? nullptr : &it->second;
  };
  const auto add = [&](int32_t i) {
    uint64_t pair;
    if (const MergeInfo* m = merge_at(i, pair)) {
      std::set<int32_t>& s = at[pair];
      if (s.empty()) queue.emplace(m->rank, pair);
      s.insert(i);
    }
  };
  const auto remove = [&](int32_t i) {
    uint64_t pair;
    if (merge_at(i, pair)) at[pair].erase(i);
  };
  for (int32_t i = 0; i + 1 < n; ++i) add(i);
  std::vector<uint64_t> tied;
  std::vector<int32_t> round;
  while (!queue.empty()) {
    const auto [rank, top_pair] = queue.top();
    queue.pop();
    if (at[top_pair].empty()) continue;
    // Pairs of equal rank (only gpt-3-encoder's comma keys make them): the scan takes the one at the
    // later position; the others go back to the queue.
    uint64_t pair = top_pair;
    tied.clear();
    while (!queue.empty() && queue.top().first == rank) {
      const uint64_t other = queue.top().second;
      queue.pop();
      if (other == pair || at[other].empty() || std::find(tied.begin(), tied.end(), other) != tied.end())
        continue;
      tied.push_back(other);
      if (*at[other].rbegin() > *at[pair].rbegin()) std::swap(tied.back(), pair);
    }
    for (uint64_t t : tied) queue.emplace(rank, t);
    const int32_t result = merge_of_.at(pair).result;
    std::set<int32_t>& s = at[pair];
    round.assign(s.begin(), s.end());
    for (int32_t i : round) {
      if (!s.count(i)) continue;  // its right node went into the previous occurrence
      const int32_t j = next[i], p = prev[i];
      remove(p), remove(i), remove(j);
      w[i] = result;
      next[i] = next[j];
      if (next[j] >= 0) prev[next[j]] = i;
      add(p), add(i);
    }
    if (!s.empty()) queue.emplace(rank, pair);  // only a vocabulary with an empty token gets here
  }
  size_t o = 0;
  for (int32_t i = 0; i >= 0; i = next[i]) w[o++] = w[i];
  w.resize(o);
}

}  // namespace qkv::text
