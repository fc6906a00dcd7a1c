#include "qkv/io/gpt2.h"

#include <filesystem>
#include <set>

#include "qkv/autograd/node.h"
#include "qkv/io/format/safetensors.h"
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

}  // namespace

std::map<std::string, Tensor> gpt2_to_qkv(const std::map<std::string, Tensor>& published, const models::GptConfig& cfg,
                                          const std::string& where) {
  NoGradGuard ng;
  const auto shapes = published_shapes(cfg);
  for (auto& [name, t] : published) {
    if (is_mask_buffer(name) || name == "lm_head.weight") continue;
    auto it = shapes.find(name);
    QKV_CHECK(it != shapes.end(), where, "tensor '", name, "' is not part of a GPT-2 with this config.json (",
              cfg.n_layer, " layers", cfg.pre_norm ? "" : ", post-LN: no ln_f", ")");
    QKV_CHECK(t.shape() == it->second, where, "tensor '", name, "': expected shape ", it->second.str(), ", got ",
              t.shape().str());
    QKV_CHECK(t.dtype() == DType::f32, where, "tensor '", name, "': expected F32, got ", dtype_name(t.dtype()));
  }
  for (auto& [name, shape] : shapes)
    QKV_CHECK(published.count(name), where, "tensor '", name, "' is missing (expected shape ", shape.str(), ")");
  if (auto lm = published.find("lm_head.weight"); lm != published.end()) {
    const Tensor& wte = published.at("wte.weight");
    QKV_CHECK(lm->second.shape() == wte.shape() && lm->second.dtype() == wte.dtype() &&
                  std::equal(lm->second.data<float>(), lm->second.data<float>() + lm->second.numel(), wte.data<float>()),
              where, "tensor 'lm_head.weight' differs from 'wte.weight': qkv's GPT ties its head to the token embedding");
  }

  std::map<std::string, Tensor> sd;
  for (auto& [pub, ours] : direct_names(cfg)) sd[ours] = published.at(pub);
  const int64_t D = cfg.n_embd;
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string h = "h." + std::to_string(i) + ".", q = "decoder.layers." + std::to_string(i) + ".";
    const Tensor& w = published.at(h + "attn.c_attn.weight");  // (D, 3D): columns [q | k | v]
    const Tensor& b = published.at(h + "attn.c_attn.bias");    // (3D)
    const char* proj[] = {"q_proj", "k_proj", "v_proj"};
    for (int64_t p = 0; p < 3; ++p) {
      sd[q + "self_attn." + proj[p] + ".weight"] = transposed(slice(w, 1, p * D, (p + 1) * D));  // (D, D) (out, in)
      sd[q + "self_attn." + proj[p] + ".bias"] = contiguous(slice(b, 0, p * D, (p + 1) * D));
    }
    sd[q + "self_attn.out_proj.weight"] = transposed(published.at(h + "attn.c_proj.weight"));
    sd[q + "self_attn.out_proj.bias"] = published.at(h + "attn.c_proj.bias");
    sd[q + "fc1.weight"] = transposed(published.at(h + "mlp.c_fc.weight"));  // (inner, D)
    sd[q + "fc1.bias"] = published.at(h + "mlp.c_fc.bias");
    sd[q + "fc2.weight"] = transposed(published.at(h + "mlp.c_proj.weight"));  // (D, inner)
    sd[q + "fc2.bias"] = published.at(h + "mlp.c_proj.bias");
  }
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

GptBundle load_gpt2(const std::string& dir) {
  const fs::path d(dir);
  const std::string cfg_path = (d / "config.json").string(), weights = (d / "model.safetensors").string();
  QKV_CHECK(fs::exists(cfg_path), dir, "not a GPT model directory: config.json is missing");
  QKV_CHECK(fs::exists(weights), dir, "not a GPT model directory: model.safetensors is missing");
  GptBundle b;
  b.config = read_gpt2_config(cfg_path);
  // Hugging Face's save_pretrained prefixes every name with "transformer." (GPT2LMHeadModel);
  // the published files have no prefix. Either is accepted; a mixture is not.
  std::map<std::string, Tensor> published;
  const std::string prefix = "transformer.";
  auto contents = safetensors::load(weights);
  bool any_prefixed = false, any_bare = false;
  for (auto& [name, t] : contents.tensors) {
    const bool p = name.rfind(prefix, 0) == 0;
    (p ? any_prefixed : any_bare) |= name != "lm_head.weight";
    published[p ? name.substr(prefix.size()) : name] = t;
  }
  QKV_CHECK(!(any_prefixed && any_bare), weights, "some tensor names have the 'transformer.' prefix and some do not");
  // Built as zeros (nothing drawn): load_state_dict overwrites every weight.
  b.model = std::make_shared<models::Gpt>(b.config, default_generator(), nn::init::Scheme::none);
  b.model->load_state_dict(gpt2_to_qkv(published, b.config, weights), /*strict=*/true, weights);
  if (fs::exists(d / "tokenizer.json") || (fs::exists(d / "encoder.json") && fs::exists(d / "vocab.bpe")))
    b.tokenizer = text::load_tokenizer(dir);
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
