#include "qkv/io/gpt2.h"

#include <filesystem>
#include <functional>
#include <set>

#include "qkv/autograd/node.h"
#include "qkv/io/format/safetensors.h"
#include "qkv/io/format/safetensors_reader.h"
#include "qkv/ops/shape.h"
#include "qkv/util/file.h"

namespace qkv::io {
namespace fs = std::filesystem;

namespace {

// The published name -> qkv name of every tensor that maps one to one (LayerNorms, embeddings).
std::map<std::string, std::string> direct_names(const models::GptConfig& cfg) {
  std::map<std::string, std::string> m = {{"wte.weight", "embed_tokens.weight"},
                                          {"wpe.weight", "embed_positions.weight"}};
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string h = "h." + std::to_string(i) + ".", q = "decoder.layers." + std::to_string(i) + ".";
    for (const char* p : {"weight", "bias"}) {
      m[h + "ln_1." + p] = q + "self_attn_layer_norm." + p;
      m[h + "ln_2." + p] = q + "final_layer_norm." + p;
    }
  }
  if (cfg.pre_norm)
    for (const char* p : {"weight", "bias"}) m[std::string("ln_f.") + p] = std::string("decoder.layer_norm.") + p;
  return m;
}

// Expected shape of every published tensor.
std::map<std::string, Shape> published_shapes(const models::GptConfig& cfg) {
  const int64_t D = cfg.n_embd, F = cfg.d_ff();
  std::map<std::string, Shape> s = {{"wte.weight", {cfg.vocab_size, D}}, {"wpe.weight", {cfg.n_positions, D}}};
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    for (const char* ln : {"ln_1.", "ln_2."}) s[h + ln + "weight"] = s[h + ln + "bias"] = Shape{D};
    s[h + "attn.c_attn.weight"] = {D, 3 * D};
    s[h + "attn.c_attn.bias"] = {3 * D};
    s[h + "attn.c_proj.weight"] = {D, D};
    s[h + "attn.c_proj.bias"] = {D};
    s[h + "mlp.c_fc.weight"] = {D, F};
    s[h + "mlp.c_fc.bias"] = {F};
    s[h + "mlp.c_proj.weight"] = {F, D};
    s[h + "mlp.c_proj.bias"] = {D};
  }
  if (cfg.pre_norm) s["ln_f.weight"] = s["ln_f.bias"] = Shape{D};
  return s;
}

Tensor transposed(const Tensor& w) { return contiguous(transpose(w, 0, 1)); }  // Conv1D (in, out) <-> Linear (out, in)

bool is_mask_buffer(const std::string& name) {  // h.{i}.attn.bias / h.{i}.attn.masked_bias
  auto ends = [&](const std::string& s) { return name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0; };
  return name.rfind("h.", 0) == 0 && (ends(".attn.bias") || ends(".attn.masked_bias"));
}

// The published tensors' names, shapes and dtypes (info: published name -> (shape, dtype)) against
// what a GPT-2 of this config has: unknown, misshapen and missing tensors are errors naming them.
void check_published(const std::map<std::string, std::pair<Shape, DType>>& info, const models::GptConfig& cfg,
                     const std::string& where) {
  const auto shapes = published_shapes(cfg);
  for (auto& [name, sd] : info) {
    if (is_mask_buffer(name) || name == "lm_head.weight") continue;
    auto it = shapes.find(name);
    QKV_CHECK(it != shapes.end(), where, "tensor '", name, "' is not part of a GPT-2 with this config.json (",
              cfg.n_layer, " layers", cfg.pre_norm ? "" : ", post-LN: no ln_f", ")");
    QKV_CHECK(sd.first == it->second, where, "tensor '", name, "': expected shape ", it->second.str(), ", got ",
              sd.first.str());
    QKV_CHECK(sd.second == DType::f32, where, "tensor '", name, "': expected F32, got ", dtype_name(sd.second));
  }
  for (auto& [name, shape] : shapes)
    QKV_CHECK(info.count(name), where, "tensor '", name, "' is missing (expected shape ", shape.str(), ")");
}

// A stored lm_head must be the token embedding itself: qkv's GPT ties the two.
void check_tied_head(const Tensor& lm_head, const Tensor& wte, const std::string& where) {
  QKV_CHECK(lm_head.shape() == wte.shape() && lm_head.dtype() == wte.dtype() &&
                std::equal(lm_head.data<float>(), lm_head.data<float>() + lm_head.numel(), wte.data<float>()),
            where, "tensor 'lm_head.weight' differs from 'wte.weight': qkv's GPT ties its head to the token embedding");
}

// Every qkv tensor from the published ones, one published tensor at a time: fetch(published name)
// gives a tensor (checked by check_published), emit(qkv name, tensor) takes each result, and
// direct(published name, qkv name) takes each tensor that maps unchanged (embeddings, LayerNorms).
// Conv1D weights (in, out) become Linear weights (out, in); c_attn's [q | k | v] columns are split.
void map_gpt2_to_qkv(const std::function<Tensor(const std::string&)>& fetch, const models::GptConfig& cfg,
                     const std::function<void(const std::string&, const Tensor&)>& emit,
                     const std::function<void(const std::string&, const std::string&)>& direct) {
  NoGradGuard ng;
  for (auto& [pub, ours] : direct_names(cfg)) direct(pub, ours);
  const int64_t D = cfg.n_embd;
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string h = "h." + std::to_string(i) + ".", q = "decoder.layers." + std::to_string(i) + ".";
    {
      const Tensor w = fetch(h + "attn.c_attn.weight");  // (D, 3D): columns [q | k | v]
      const Tensor b = fetch(h + "attn.c_attn.bias");    // (3D)
      const char* proj[] = {"q_proj", "k_proj", "v_proj"};
      for (int64_t p = 0; p < 3; ++p) {
        emit(q + "self_attn." + proj[p] + ".weight", transposed(slice(w, 1, p * D, (p + 1) * D)));  // (D, D) (out, in)
        emit(q + "self_attn." + proj[p] + ".bias", contiguous(slice(b, 0, p * D, (p + 1) * D)));
      }
    }
    emit(q + "self_attn.out_proj.weight", transposed(fetch(h + "attn.c_proj.weight")));
    emit(q + "self_attn.out_proj.bias", fetch(h + "attn.c_proj.bias"));
    emit(q + "fc1.weight", transposed(fetch(h + "mlp.c_fc.weight")));  // (inner, D)
    emit(q + "fc1.bias", fetch(h + "mlp.c_fc.bias"));
    emit(q + "fc2.weight", transposed(fetch(h + "mlp.c_proj.weight")));  // (D, inner)
    emit(q + "fc2.bias", fetch(h + "mlp.c_proj.bias"));
  }
}

}  // namespace

std::map<std::string, Tensor> gpt2_to_qkv(const std::map<std::string, Tensor>& published, const models::GptConfig& cfg,
                                          const std::string& where) {
  std::map<std::string, std::pair<Shape, DType>> info;
  for (auto& [name, t] : published) info[name] = {t.shape(), t.dtype()};
  check_published(info, cfg, where);
  if (auto lm = published.find("lm_head.weight"); lm != published.end())
    check_tied_head(lm->second, published.at("wte.weight"), where);
  std::map<std::string, Tensor> sd;
  map_gpt2_to_qkv([&](const std::string& name) { return published.at(name); }, cfg,
                  [&](const std::string& name, const Tensor& t) { sd[name] = t; },
                  [&](const std::string& pub, const std::string& ours) { sd[ours] = published.at(pub); });
  return sd;
}

std::map<std::string, Tensor> qkv_to_gpt2(const models::Gpt& model) {
  NoGradGuard ng;
  const models::GptConfig& cfg = model.config();
  const auto sd = model.state_dict();
  std::map<std::string, Tensor> out;
  for (auto& [pub, ours] : direct_names(cfg)) out[pub] = sd.at(ours).contiguous();
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string h = "h." + std::to_string(i) + ".", q = "decoder.layers." + std::to_string(i) + ".self_attn.";
    const std::string f = "decoder.layers." + std::to_string(i) + ".";
    out[h + "attn.c_attn.weight"] = contiguous(concat(
        {transpose(sd.at(q + "q_proj.weight"), 0, 1), transpose(sd.at(q + "k_proj.weight"), 0, 1),
         transpose(sd.at(q + "v_proj.weight"), 0, 1)}, 1));  // (D, 3D)
    out[h + "attn.c_attn.bias"] = concat({sd.at(q + "q_proj.bias"), sd.at(q + "k_proj.bias"), sd.at(q + "v_proj.bias")}, 0);
    out[h + "attn.c_proj.weight"] = transposed(sd.at(q + "out_proj.weight"));
    out[h + "attn.c_proj.bias"] = sd.at(q + "out_proj.bias").contiguous();
    out[h + "mlp.c_fc.weight"] = transposed(sd.at(f + "fc1.weight"));
    out[h + "mlp.c_fc.bias"] = sd.at(f + "fc1.bias").contiguous();
    out[h + "mlp.c_proj.weight"] = transposed(sd.at(f + "fc2.weight"));
    out[h + "mlp.c_proj.bias"] = sd.at(f + "fc2.bias").contiguous();
  }
  return out;
}

models::GptConfig read_gpt2_config(const std::string& path) {
  try {
    return nlohmann::json::parse(read_file(path)).get<models::GptConfig>();
  } catch (const nlohmann::json::exception& e) {
    fail(path, "not valid JSON: ", e.what());
  } catch (const Error& e) {
    fail(path, e.what());
  }
}

std::shared_ptr<models::Gpt> read_gpt2_body(const safetensors::Reader& file,
                                            const std::map<std::string, std::string>& in_file,
                                            const models::GptConfig& cfg, kernels::MatmulPrecision precision) {
  const std::string& where = file.path();
  std::map<std::string, std::pair<Shape, DType>> info;
  for (auto& [published, name] : in_file) info[published] = {file.shape(name), file.dtype(name)};
  check_published(info, cfg, where);  // from the header alone, before any tensor is read
  auto fetch = [&](const std::string& published) {  // checked under the file's name, before any transposition
    Tensor t = file.read(in_file.at(published));
    nn::check_finite_weight(where, in_file.at(published), t);
    return t;
  };
  if (in_file.count("lm_head.weight")) check_tied_head(fetch("lm_head.weight"), fetch("wte.weight"), where);
  // Built as zeros (nothing drawn), then filled tensor by tensor; every parameter exactly once.
  auto model = std::make_shared<models::Gpt>(cfg, default_generator(), nn::init::Scheme::none);
  model->hold_weights(precision);  // the zeros: no f32 touched; each weight rounded or quantized as it is read
  std::map<std::string, Tensor> params = model->state_dict();  // the model's own tensors
  std::set<std::string> unfilled;
  for (const auto& [name, t] : params) unfilled.insert(name);
  auto take = [&](const std::string& name) {
    QKV_CHECK(unfilled.erase(name) == 1, where, "internal: the GPT-2 mapping gives '", name, "' twice or unknown");
  };
  map_gpt2_to_qkv(
      fetch, cfg,
      [&](const std::string& name, const Tensor& t) {
        take(name);
        model->load_state_dict({{name, t}}, /*strict=*/false, where);  // checks the shape and dtype
      },
      [&](const std::string& pub, const std::string& ours) {  // read straight into the parameter
        take(ours);
        nn::read_parameter(file, in_file.at(pub), params.at(ours));
      });
  QKV_CHECK(unfilled.empty(), where, "internal: the GPT-2 mapping left '", *unfilled.begin(), "' unfilled");
  return model;
}

GptBundle load_gpt2(const std::string& dir, kernels::MatmulPrecision precision) {
  const fs::path d(dir);
  const std::string cfg_path = (d / "config.json").string(), weights = (d / "model.safetensors").string();
  QKV_CHECK(fs::exists(cfg_path), dir, "not a GPT model directory: config.json is missing");
  QKV_CHECK(fs::exists(weights), dir, "not a GPT model directory: model.safetensors is missing");
  // A classifier's directory (io/gpt2_cls.h) is a GPT config plus 'qkv_classifier': say so, rather than
  // refuse that field as an unknown key.
  const nlohmann::json raw = nlohmann::json::parse(read_file(cfg_path), nullptr, /*allow_exceptions=*/false);
  QKV_CHECK(!(raw.is_object() && raw.contains("qkv_classifier")), dir, "is a GPT classifier (config.json has "
            "'qkv_classifier'; apply it with qkv classify), not a language model");
  GptBundle b;
  b.config = read_gpt2_config(cfg_path);
  // Hugging Face's save_pretrained prefixes every name with "transformer." (GPT2LMHeadModel);
  // the published files have no prefix. Either is accepted; a mixture is not.
  const safetensors::Reader file(weights);
  const std::string prefix = "transformer.";
  std::map<std::string, std::string> in_file;  // published name -> name in the file
  bool any_prefixed = false, any_bare = false;
  for (const std::string& name : file.names()) {
    const bool p = name.rfind(prefix, 0) == 0;
    (p ? any_prefixed : any_bare) |= name != "lm_head.weight";
    in_file[p ? name.substr(prefix.size()) : name] = name;
  }
  QKV_CHECK(!(any_prefixed && any_bare), weights, "some tensor names have the 'transformer.' prefix and some do not");
  b.model = read_gpt2_body(file, in_file, b.config, precision);
  if (fs::exists(d / "tokenizer.json") || (fs::exists(d / "encoder.json") && fs::exists(d / "vocab.bpe"))) {
    b.tokenizer = text::load_tokenizer(dir);
    // As BERT's: ids past the embedding were found only at use, blamed on the input ("id 116 ... out
    // of range for a vocabulary of V = 100" for a prompt).
    const std::string tok_file = (d / (fs::exists(d / "tokenizer.json") ? "tokenizer.json" : "encoder.json")).string();
    QKV_CHECK(b.tokenizer->vocab_size() <= b.config.vocab_size, tok_file, "the tokenizer has ",
              b.tokenizer->vocab_size(), " ids but config.json's vocab_size is ", b.config.vocab_size);
  }
  return b;
}

void save_gpt2(const std::string& dir, const GptBundle& bundle) {
  QKV_CHECK(bundle.model != nullptr, "save_gpt2", "no model to save");
  fs::create_directories(dir);
  const fs::path d(dir);
  nlohmann::json config = bundle.model->config();
  if (bundle.tokenizer) {  // GPT2Config's special ids (not architecture): what generation stops at
    if (auto bos = bundle.tokenizer->special_id(text::Role::Bos)) config["bos_token_id"] = *bos;
    if (auto eos = bundle.tokenizer->special_id(text::Role::Eos)) config["eos_token_id"] = *eos;
  }
  write_file_atomic((d / "config.json").string(), config.dump(2) + "\n");
  safetensors::save((d / "model.safetensors").string(), qkv_to_gpt2(*bundle.model), {{"format", "pt"}});
  if (bundle.tokenizer) bundle.tokenizer->save((d / "tokenizer.json").string());
}

}  // namespace qkv::io
