#include "qkv/tasks/tagger.h"

#include <algorithm>
#include <cmath>

#include "qkv/autograd/node.h"
#include "qkv/train/tag_task.h"

namespace qkv::tasks {

Tagger::Tagger(const std::string& model_dir, kernels::MatmulPrecision precision)
    : Tagger(io::load_bert_tagger(model_dir, precision)) {
  QKV_CHECK(bundle_.tokenizer != nullptr, model_dir, "has no tokenizer (tokenizer.json or vocab.txt)");
}

Tagger::Tagger(io::BertTaggerBundle bundle) : bundle_(std::move(bundle)) {
  QKV_CHECK(bundle_.model && bundle_.tokenizer, "Tagger", "needs a model and its tokenizer");
}

std::vector<Tagging> Tagger::tag(const std::vector<std::vector<std::string>>& sentences, const TagOptions& opt) const {
  QKV_CHECK(opt.batch_size > 0, "tag", "batch_size must be positive, got ", opt.batch_size);
  kernels::check_task_precision(opt.precision, "tag");
  const int64_t P = bundle_.config.max_position_embeddings;
  const int64_t max_len = opt.max_len > 0 ? std::min(opt.max_len, P) : P;
  QKV_CHECK(max_len >= 3, "tag", "windows of ", max_len, " positions leave no room for a word between [CLS] and [SEP]");
  const int64_t budget = max_len - 2;
  const int64_t stride = opt.stride > 0 ? std::min(opt.stride, budget) : std::max<int64_t>(1, budget / 2);
  const train::TagSpecials sp = train::TagSpecials::of(*bundle_.tokenizer);

  // Every window of every sentence, and where each word's prediction comes from.
  struct Window {
    size_t sentence;
    text::WordWindow words;
    int64_t first_piece;  // the window's first piece in the sentence's pieces
  };
  std::vector<Window> windows;
  std::vector<train::TagExample> examples;
  std::vector<text::WordPieces> pieces(sentences.size());
  std::vector<std::vector<int64_t>> owner(sentences.size());  // word -> global window index
  std::vector<Tagging> out(sentences.size());
  for (size_t s = 0; s < sentences.size(); ++s) {
    pieces[s] = text::split_words(*bundle_.tokenizer, sentences[s], budget, sp.unk);
    const auto ws = text::word_windows(pieces[s], budget, stride);
    const auto local = text::window_of_word(ws, pieces[s].words());
    owner[s].resize(local.size());
    for (size_t w = 0; w < local.size(); ++w) owner[s][w] = int64_t(windows.size()) + local[w];
    for (const auto& w : ws) {
      windows.push_back({s, w, pieces[s].word_start[size_t(w.begin)]});
      examples.push_back(train::make_tag_example(pieces[s], w, {}, sp));
    }
    out[s].windows = int64_t(ws.size());
    out[s].words_cut = pieces[s].words_cut;
    out[s].tags.resize(sentences[s].size());
    out[s].tag_ids.resize(sentences[s].size());
    if (opt.probabilities) out[s].probability.resize(sentences[s].size());
  }
  // Per window: label id and probability at each of its pieces' positions (filled below).
  std::vector<std::vector<std::pair<int64_t, double>>> best(windows.size());

  models::BertForTokenClassification& model = *bundle_.model;
  const nn::EvalScope eval_mode(model);
  NoGradGuard ng;
  kernels::MatmulPrecisionScope products(opt.precision);
  const int64_t C = model.num_labels();
  for (size_t s = 0; s < examples.size(); s += size_t(opt.batch_size)) {
    std::vector<const train::TagExample*> rows;
    const size_t e = std::min(examples.size(), s + size_t(opt.batch_size));
    for (size_t k = s; k < e; ++k) rows.push_back(&examples[k]);
    models::PackedSequences packed;  // the rows end to end, without padding
    for (const train::TagExample* x : rows) packed.add(x->ids);
    const std::vector<int64_t>& lengths = packed.lengths();
    const Tensor logits = model.forward_packed(packed.ids(), lengths).contiguous();  // (1, N, C)
    const float* lg = logits.data<float>();
    for (size_t r = 0; r < rows.size(); ++r) {
      const int64_t n = lengths[r];
      auto& bw = best[s + r];
      bw.resize(size_t(n));
      for (int64_t t = 0; t < n; ++t, lg += C) {
        const float* row = lg;
        int64_t m = 0;
        for (int64_t c = 1; c < C; ++c)
          if (row[c] > row[m]) m = c;
        double z = 0;  // softmax in double: exp(l - max) / sum
        if (opt.probabilities)
          for (int64_t c = 0; c < C; ++c) z += std::exp(double(row[c]) - double(row[m]));
        bw[size_t(t)] = {m, opt.probabilities ? 1.0 / z : 0.0};
      }
    }
  }
  for (size_t s = 0; s < sentences.size(); ++s)
    for (size_t w = 0; w < sentences[s].size(); ++w) {
      const int64_t k = owner[s][w];
      const Window& win = windows[size_t(k)];
      const int64_t pos = 1 + pieces[s].word_start[w] - win.first_piece;  // the word's first piece, after [CLS]
      const auto [id, p] = best[size_t(k)][size_t(pos)];
      out[s].tag_ids[w] = id;
      out[s].tags[w] = bundle_.labels[size_t(id)];
      if (opt.probabilities) out[s].probability[w] = p;
    }
  return out;
}

}  // namespace qkv::tasks
