// The attention viewer's data: one recorded forward pass per model family (attention_view.h).
#include "qkv/tasks/attention_view.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <tuple>

#include "qkv/attention/sdpa.h"
#include "qkv/autograd/node.h"
#include "qkv/models/transformer.h"
#include "qkv/ops/shape.h"
#include "qkv/util/file.h"

namespace qkv::tasks {
namespace {

using attention::AttentionRecord;
using attention::MultiHeadAttention;

// Every MultiHeadAttention of a module tree, by scoped name, with a record attached while this
// object lives (the model runs its ordinary forward meanwhile).
class Recorders {
 public:
  Recorders(nn::Module& root, AttentionRecord::Naive naive) {
    collect(root, "");
    records_.resize(mhas_.size());
    for (size_t i = 0; i < mhas_.size(); ++i) {
      records_[i].naive = naive;
      mhas_[i].second->set_recorder(&records_[i]);
    }
  }
  ~Recorders() {
    for (auto& [name, m] : mhas_) m->set_recorder(nullptr);
  }
  Recorders(const Recorders&) = delete;
  Recorders& operator=(const Recorders&) = delete;

  // The layers prefix{i}suffix (e.g. "encoder.layers." i ".self_attn"), by layer number.
  std::map<int64_t, std::pair<MultiHeadAttention*, const AttentionRecord*>> stack(const std::string& prefix,
                                                                                 const std::string& suffix) const {
    std::map<int64_t, std::pair<MultiHeadAttention*, const AttentionRecord*>> out;
    for (size_t i = 0; i < mhas_.size(); ++i) {
      const std::string& n = mhas_[i].first;
      if (n.size() <= prefix.size() + suffix.size() || n.compare(0, prefix.size(), prefix) != 0 ||
          n.compare(n.size() - suffix.size(), suffix.size(), suffix) != 0)
        continue;
      std::string mid = n.substr(prefix.size(), n.size() - prefix.size() - suffix.size());
      if (mid.empty() || mid.find_first_not_of("0123456789") != std::string::npos) continue;
      out[std::stoll(mid)] = {mhas_[i].second, &records_[i]};
    }
    return out;
  }

 private:
  void collect(nn::Module& m, const std::string& name) {
    if (auto* a = dynamic_cast<MultiHeadAttention*>(&m)) mhas_.emplace_back(name, a);
    for (auto& [child, c] : m.named_children()) collect(*c, name.empty() ? child : name + "." + child);
  }
  std::vector<std::pair<std::string, MultiHeadAttention*>> mhas_;
  std::vector<AttentionRecord> records_;
};

std::vector<int64_t> pick(const std::vector<int64_t>& wanted, int64_t n, const char* what) {
  if (wanted.empty()) {
    std::vector<int64_t> all(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) all[size_t(i)] = i;
    return all;
  }
  for (size_t i = 0; i < wanted.size(); ++i) {
    const int64_t x = wanted[i];
    QKV_CHECK(x >= 0 && x < n, "viz", "--", what, " ", x, " is out of range: the model has ", n, " ", what,
              " (0..", n - 1, ")");
    QKV_CHECK(std::find(wanted.begin(), wanted.begin() + int64_t(i), x) == wanted.begin() + int64_t(i), "viz", "--",
              what, " ", x, " is given twice");
  }
  return wanted;
}

// The weights of one recorded stack as a page set: (layers, heads, Tq, Tk) for the layers and heads asked for.
viz::AttentionSet make_set(const Recorders& rec, const std::string& prefix, const std::string& suffix,
                           const ViewOptions& opt, viz::AttentionSet set) {
  auto layers = rec.stack(prefix, suffix);
  QKV_CHECK(!layers.empty(), "viz", "the model has no attention layers named ", prefix, "{i}", suffix);
  const int64_t L = int64_t(layers.size()), H = layers.begin()->second.first->heads();
  set.layers = pick(opt.layers, L, "layers");
  set.heads = pick(opt.heads, H, "heads");
  for (int64_t l : set.layers) {
    QKV_CHECK(layers.count(l), "viz", "layer ", l, " of ", prefix, "{i}", suffix, " is missing");
    const AttentionRecord& r = *layers.at(l).second;
    QKV_CHECK(r.calls > 0, "viz", prefix, l, suffix, " was not run by the forward pass");
    Tensor w;  // (1, heads, Tq, Tk)
    if (r.weights.defined()) {  // naive path or relative positions: all heads, pick ours
      std::vector<Tensor> parts;
      for (int64_t h : set.heads) parts.push_back(slice(r.weights, 1, h, h + 1));
      w = concat(parts, 1).contiguous();
    } else {
      w = attention_weights(r.q, r.k, r.mask, {}, set.heads).contiguous();
    }
    QKV_CHECK(w.ndim() == 4 && w.size(0) == 1 && w.size(1) == int64_t(set.heads.size()), "viz",
              "unexpected weights ", w.str());
    if (set.tq == 0) set.tq = w.size(2), set.tk = w.size(3);
    const float* p = w.data<float>();
    set.weights.insert(set.weights.end(), p, p + w.numel());
  }
  return set;
}

void check_size(const viz::AttentionPage& page, const ViewOptions& opt) {
  const int64_t bound = viz::attention_page_size_bound(page);
  QKV_CHECK(bound <= opt.max_bytes, "viz", "the page could reach ", bound, " bytes (", double(bound) / (1 << 20),
            " MiB), over the limit of ", opt.max_bytes, " bytes (--max-mb): show fewer --layers or --heads, or a "
            "shorter text");
}

void check_text(const std::string& s, const char* what) {
  QKV_CHECK(s.find_first_not_of(" \t\r\n") != std::string::npos, "viz", "the ", what, " is empty");
}

// The table PE[0:P] and its Gram matrix PE PE^T.
viz::PositionalPanel positional_panel(const Tensor& table_full, int64_t positions, const std::string& name) {
  viz::PositionalPanel pe;
  pe.name = name;
  Tensor t = slice(table_full, 0, 0, positions).contiguous();  // (P, D)
  pe.positions = positions, pe.dim = t.size(1);
  const float* x = t.data<float>();
  pe.table.assign(x, x + t.numel());
  pe.dots.resize(size_t(positions * positions));
  for (int64_t i = 0; i < positions; ++i)
    for (int64_t j = 0; j < positions; ++j) {
      double s = 0;
      for (int64_t d = 0; d < pe.dim; ++d) s += double(x[i * pe.dim + d]) * x[j * pe.dim + d];
      pe.dots[size_t(i * positions + j)] = float(s);
    }
  return pe;
}

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

// An RNN encoder-decoder: its one attention (Bahdanau or Luong), decoder -> encoder, from the
// model's own cross_attention (the PNG heatmaps' path; an RNN has no fused kernel to replay).
viz::AttentionPage rnn_attention_page(models::Seq2Seq& m, const std::vector<int64_t>& src,
                                      const std::vector<int64_t>& tgt_in, const ViewOptions& opt,
                                      viz::AttentionPage page) {
  page.model_type = "rnn";
  models::AttentionMaps maps;
  {
    NoGradGuard ng;
    const nn::EvalScope eval_mode(m);
    maps = m.cross_attention(Tensor::from_vector(src, Shape{1, int64_t(src.size())}),
                             Tensor::zeros({1, int64_t(src.size())}, DType::u8),
                             Tensor::from_vector(tgt_in, Shape{1, int64_t(tgt_in.size())}));
  }
  QKV_CHECK(!maps.layers.empty(), "viz", "the model has no attention to show (an RNN with \"attention\": \"none\")");
  pick(opt.layers, 1, "layers");
  pick(opt.heads, 1, "heads");
  Tensor w = maps.layers[0].contiguous();  // (1, 1, T, S)
  viz::AttentionSet cross;
  cross.name = "attention (target -> source)", cross.queries = "target", cross.keys = "source";
  cross.layers = {0}, cross.heads = {0};
  cross.tq = w.size(2), cross.tk = w.size(3);
  cross.weights.assign(w.data<float>(), w.data<float>() + w.numel());
  page.sets.push_back(std::move(cross));
  page.info.push_back({"shown", "the RNN decoder's attention over the encoder states (one layer, one head)"});
  check_size(page, opt);
  return page;
}

}  // namespace

viz::AttentionPage translation_attention_page(const Translator& t, const ViewInput& in, const ViewOptions& opt,
                                              const std::string& title) {
  const io::Seq2SeqBundle& b = t.bundle();
  QKV_CHECK(b.model, "viz", "no model loaded");
  auto* model = dynamic_cast<models::Transformer*>(b.model.get());  // null: an RNN encoder-decoder
  QKV_CHECK(b.src_tok && b.tgt_tok, "viz", "the model directory has no tokenizer");
  if (!in.source_ids) check_text(in.text, "source text");  // (a line translate translated is drawn as it was)
  const train::SeqIds ids = t.special_ids();
  const int64_t max_len = b.model->max_len();
  // The source as translate reads it: a model trained with protected spans sees placeholders. A
  // given target is encoded with it as score encodes a pair: the spans both share, as training saw them.
  std::vector<int64_t> src, hyp;  // hyp: y1 .. yn
  if (in.target && !in.target_ids) {
    check_text(*in.target, "target text");
    std::tie(src, hyp) = t.pair_ids(in.text, *in.target);
    if (in.source_ids) src = *in.source_ids;
  } else {
    src = in.source_ids ? *in.source_ids : t.source_ids(in.text);
  }
  QKV_CHECK(int64_t(src.size()) <= max_len, "viz", "the source text has ", src.size() - 1,
            " tokens (plus </s>), more than the model's max_len ", max_len, " allows (config.json \"max_len\")");
  std::string target_text;
  if (in.target_ids) {
    hyp = *in.target_ids;
    QKV_CHECK(int64_t(hyp.size()) <= max_len, "viz", "the target has ", hyp.size(), " tokens, more than the model's max_len ",
              max_len);
    target_text = t.restore_spans(t.detokenize(hyp), in.text);
  } else if (in.target) {
    QKV_CHECK(int64_t(hyp.size()) <= max_len, "viz", "the target text has ", hyp.size() - 1,
              " tokens (plus </s>), more than the model's max_len ", max_len, " allows");
    target_text = *in.target;
  } else {
    TranslateOptions to;
    to.quiet = true;
    auto h = t.translate_ids({src}, to);
    hyp = h.at(0).front().tokens;
    target_text = t.restore_spans(t.detokenize(hyp), in.text);
  }
  QKV_CHECK(!hyp.empty(), "viz", "the translation produced no tokens to show");
  std::vector<int64_t> tgt_in{ids.bos};  // <s> y1 .. y_{n-1}: position t attends while producing y_{t+1}
  tgt_in.insert(tgt_in.end(), hyp.begin(), hyp.end() - 1);

  viz::AttentionPage page;
  page.model_type = "transformer";
  page.title = title.empty() ? "qkv attention" : title;
  page.info = {{"source", in.text}, {in.target_ids ? "target (translation)" : in.target ? "target (given)" : "target (greedy decode)", target_text}};
  page.sequences = {{"source", token_labels(*b.src_tok, src)},
                    {"decoder input", token_labels(*b.tgt_tok, tgt_in)},
                    {"target", token_labels(*b.tgt_tok, hyp)}};
  if (!model) return rnn_attention_page(*b.model, src, tgt_in, opt, std::move(page));
  {
    Recorders rec(*model, opt.naive);
    NoGradGuard ng;
    const nn::EvalScope eval_mode(*model);
    model->forward(Tensor::from_vector(src, Shape{1, int64_t(src.size())}),
                   Tensor::zeros({1, int64_t(src.size())}, DType::u8),
                   Tensor::from_vector(tgt_in, Shape{1, int64_t(tgt_in.size())}));
    viz::AttentionSet enc, dec, cross;
    enc.name = "encoder self-attention", enc.queries = "source", enc.keys = "source";
    dec.name = "decoder self-attention (causal)", dec.queries = "decoder input", dec.keys = "decoder input",
    dec.causal = true;
    cross.name = "cross-attention (target -> source)", cross.queries = "target", cross.keys = "source";
    page.sets.push_back(make_set(rec, "encoder.layers.", ".self_attn", opt, enc));
    page.sets.push_back(make_set(rec, "decoder.layers.", ".self_attn", opt, dec));
    page.sets.push_back(make_set(rec, "decoder.layers.", ".encoder_attn", opt, cross));
  }
  page.info.push_back({"shown", "layers " + join(page.sets[0].layers) + "; heads " + join(page.sets[0].heads) +
                                    (opt.naive != AttentionRecord::Naive::none ? " (naive attention path)" : " (replayed from the fused kernel's queries and keys)")});
  page.info.push_back({"rows of cross-attention", "the target token each decoder position produces"});
  if (model->sinusoid) {
    const int64_t P = std::max(src.size(), tgt_in.size());
    page.positional = positional_panel(model->sinusoid->table(), int64_t(P),
                                       "sinusoidal positions (interleaved sin/cos), positions 0.." +
                                           std::to_string(P - 1) + ", d_model " + std::to_string(model->config().d_model));
  }
  check_size(page, opt);
  return page;
}

viz::AttentionPage gpt_attention_page(const io::GptBundle& b, const ViewInput& in, const ViewOptions& opt,
                                      const std::string& title) {
  QKV_CHECK(b.model && b.tokenizer, "viz", "the GPT model directory has no tokenizer");
  check_text(in.text, "prompt");
  std::vector<int32_t> ids32 = b.tokenizer->encode(in.text);
  QKV_CHECK(!ids32.empty(), "viz", "the prompt encodes to no tokens");
  const int64_t max_len = b.config.n_positions;
  QKV_CHECK(int64_t(ids32.size()) <= max_len, "viz", "the prompt has ", ids32.size(),
            " tokens, more than the model's n_positions ", max_len, " (config.json)");
  std::vector<int64_t> ids(ids32.begin(), ids32.end());
  viz::AttentionPage page;
  page.model_type = "gpt";
  page.title = title.empty() ? "qkv attention" : title;
  page.info = {{"prompt", in.text}};
  page.sequences = {{"prompt", token_labels(*b.tokenizer, ids)}};
  {
    Recorders rec(*b.model, opt.naive);
    NoGradGuard ng;
    const nn::EvalScope eval_mode(*b.model);
    b.model->hidden(Tensor::from_vector(ids, Shape{1, int64_t(ids.size())}));
    viz::AttentionSet s;
    s.name = "self-attention (causal)", s.queries = "prompt", s.keys = "prompt", s.causal = true;
    page.sets.push_back(make_set(rec, "decoder.layers.", ".self_attn", opt, s));
  }
  check_size(page, opt);
  return page;
}

viz::AttentionPage bert_attention_page(const io::BertBundle& b, const ViewInput& in, const ViewOptions& opt,
                                       const std::string& title) {
  QKV_CHECK(b.bert && b.tokenizer, "viz", "the BERT model directory has no tokenizer");
  check_text(in.text, "text");
  if (in.pair) check_text(*in.pair, "second segment (--pair)");
  const text::Tokenizer& tok = *b.tokenizer;
  const int64_t cls = tok.require_special_id(text::Role::Cls), sep = tok.require_special_id(text::Role::Sep);
  std::vector<int64_t> ids{cls};
  for (int32_t id : tok.encode(in.text)) ids.push_back(id);
  ids.push_back(sep);
  std::vector<int> seg(ids.size(), 0);
  if (in.pair) {
    for (int32_t id : tok.encode(*in.pair)) ids.push_back(id);
    ids.push_back(sep);
    seg.resize(ids.size(), 1);
  }
  const int64_t max_len = b.config.max_position_embeddings;
  QKV_CHECK(int64_t(ids.size()) <= max_len, "viz", "the text has ", ids.size(), " tokens with [CLS]/[SEP], more than "
            "the model's max_position_embeddings ", max_len, " (config.json)");
  viz::AttentionPage page;
  page.model_type = "bert";
  page.title = title.empty() ? "qkv attention" : title;
  page.info = {{"segment A", in.text}};
  if (in.pair) page.info.push_back({"segment B", *in.pair});
  page.sequences = {{"text", token_labels(tok, ids)}};
  if (in.pair) page.segments = {{"text", seg}};
  {
    Recorders rec(*b.bert, opt.naive);
    NoGradGuard ng;
    const nn::EvalScope eval_mode(*b.bert);
    const std::vector<int64_t> types(seg.begin(), seg.end());
    b.bert->forward(Tensor::from_vector(ids, Shape{1, int64_t(ids.size())}),
                    Tensor::from_vector(types, Shape{1, int64_t(types.size())}));
    viz::AttentionSet s;
    s.name = "self-attention", s.queries = "text", s.keys = "text";
    page.sets.push_back(make_set(rec, "encoder.layers.", ".self_attn", opt, s));
  }
  check_size(page, opt);
  return page;
}

std::string detect_model_type(const std::string& dir) {
  namespace fs = std::filesystem;
  QKV_CHECK(fs::is_directory(dir), "viz", "--model ", dir, ": no such directory");
  const std::string cfg = (fs::path(dir) / "config.json").string();
  QKV_CHECK(fs::is_regular_file(cfg), "viz", cfg, ": missing (a model directory holds config.json and model.safetensors)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(cfg));
  } catch (const nlohmann::json::exception& e) {
    fail(cfg, "not valid JSON: ", e.what());
  }
  QKV_CHECK(j.is_object() && j.contains("model_type") && j["model_type"].is_string(), cfg,
            "expected a string \"model_type\" (transformer, rnn, gpt2 or bert)");
  std::string t = j["model_type"].get<std::string>();
  QKV_CHECK(t == "transformer" || t == "rnn" || t == "gpt2" || t == "bert", cfg + ": model_type",
            "expected transformer, rnn, gpt2 or bert, got \"", t, "\"");
  return t;
}

int64_t write_attention_view(const std::string& dir, const ViewInput& in, const std::string& html,
                             const ViewOptions& opt) {
  const std::string type = detect_model_type(dir);
  const std::string title = "qkv attention: " + dir;
  viz::AttentionPage page;
  if (type == "transformer" || type == "rnn") {
    QKV_CHECK(!in.pair, "viz", "--pair is for BERT models; a translation model takes --target");
    Translator t(dir);
    page = translation_attention_page(t, in, opt, title);
  } else if (type == "gpt2") {
    QKV_CHECK(!in.pair && !in.target, "viz", "a GPT model takes one prompt (no --target or --pair)");
    page = gpt_attention_page(io::load_gpt2(dir), in, opt, title);
  } else {
    QKV_CHECK(!in.target, "viz", "--target is for translation models; BERT takes --pair");
    page = bert_attention_page(io::load_bert(dir), in, opt, title);
  }
  return viz::write_attention_page(html, page);
}

std::vector<std::string> token_labels(const text::Tokenizer& tok, const std::vector<int64_t>& ids) {
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (int64_t id : ids) {
    std::vector<int32_t> one{int32_t(id)};
    std::string s = tok.decode(one, /*skip_special=*/false);
    const auto b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
    s = b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
    out.push_back(s.empty() ? tok.id_to_token(int32_t(id)) : s);
  }
  return out;
}

}  // namespace qkv::tasks
