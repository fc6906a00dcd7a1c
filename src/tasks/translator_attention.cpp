// Translator::draw_attention: cross-attention heatmaps of one translated sentence.
#include <algorithm>
#include <cstdio>

#include "qkv/autograd/node.h"
#include "qkv/tasks/attention_view.h"
#include "qkv/tasks/translator.h"
#include "qkv/viz/heatmap.h"

namespace qkv::tasks {

size_t Translator::draw_attention(const Translations& r, const std::vector<std::string>& lines, int64_t line,
                                  const std::string& png) const {
  check_tokenizers("Translator::draw_attention");
  const io::Seq2SeqBundle& b = bundle_;
  QKV_CHECK(line >= 1 && line <= int64_t(lines.size()), "--attention-line", "must be in 1..", lines.size(), ", got ",
            line);
  const auto& src = r.src_ids[size_t(line - 1)];
  const auto& hyp = r.hyps[size_t(line - 1)].front().tokens;  // y1 .. yn (</s> last if produced)
  QKV_CHECK(!hyp.empty(), "translate", "line ", line, " produced no tokens to draw");
  const train::SeqIds& ids = ids_;
  std::vector<int64_t> tgt_in{ids.bos};  // <s> y1 .. y_{n-1}: row t attends while producing y_t
  tgt_in.insert(tgt_in.end(), hyp.begin(), hyp.end() - 1);
  int64_t S = int64_t(src.size()), T = int64_t(tgt_in.size());
  Tensor src_t = Tensor::from_vector(src, Shape{1, S}), pad = Tensor::zeros({1, S}, DType::u8);
  Tensor tgt_t = Tensor::from_vector(tgt_in, Shape{1, T});
  models::AttentionMaps maps;
  {
    NoGradGuard ng;
    maps = b.model->cross_attention(src_t, pad, tgt_t);
  }
  const std::vector<std::string> cols = token_labels(*b.src_tok, src), rows = token_labels(*b.tgt_tok, hyp);
  std::vector<viz::Heatmap> panels;
  for (size_t l = 0; l < maps.layers.size(); ++l) {
    Tensor w = maps.layers[l].contiguous();  // (1, H, T, S)
    int64_t H = w.size(1);
    for (int64_t h = 0; h < H; ++h) {
      viz::Heatmap p;
      p.rows = int(T);
      p.cols = int(S);
      const float* base = w.data<float>() + h * T * S;
      p.values.assign(base, base + T * S);
      p.row_labels = rows;
      p.col_labels = cols;
      p.title = maps.layers.size() == 1 && H == 1 ? "attention" : "layer " + std::to_string(l) + " head " + std::to_string(h);
      panels.push_back(std::move(p));
    }
  }
  QKV_CHECK(!panels.empty(), "translate", "the model has no cross-attention to draw (e.g. an RNN with \"attention\": \"none\")");
  if (panels.size() > 1) panels.push_back(viz::average_heatmap(panels, "mean of all heads"));
  viz::HeatmapOptions opt;
  opt.title = "cross-attention: " + lines[size_t(line - 1)];
  opt.colorbar_label = "attention weight";
  opt.vmin = 0;  // the maximum follows the data, so weak heads stay visible
  viz::write_heatmap_grid(png, panels, opt);
  return panels.size();
}

}  // namespace qkv::tasks
