#include "qkv/io/bert.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "qkv/autograd/node.h"
#include "qkv/io/format/safetensors.h"
#include "qkv/io/format/safetensors_reader.h"
#include "qkv/util/file.h"

namespace qkv::io {
namespace fs = std::filesystem;

namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// qkv's EncoderBlock names -> BertLayer's (the same Linear/LayerNorm, another path).
const std::pair<const char*, const char*> kLayerNames[] = {
    {"self_attn.q_proj.", "attention.self.query."},      {"self_attn.k_proj.", "attention.self.key."},
    {"self_attn.v_proj.", "attention.self.value."},      {"self_attn.out_proj.", "attention.output.dense."},
    {"self_attn_layer_norm.", "attention.output.LayerNorm."}, {"fc1.", "intermediate.dense."},
    {"fc2.", "output.dense."},                           {"final_layer_norm.", "output.LayerNorm."}};

// A Bert parameter name (qkv) -> its published name.
std::string published_encoder_name(const std::string& ours) {
  const std::string layers = "encoder.layers.";
  if (!starts_with(ours, layers)) return "bert." + ours;  // embeddings.*, pooler.dense.*: the same path
  const size_t dot = ours.find('.', layers.size());
  const std::string index = ours.substr(layers.size(), dot - layers.size()), rest = ours.substr(dot + 1);
  for (auto [q, p] : kLayerNames)
    if (starts_with(rest, q)) return "bert.encoder.layer." + index + "." + p + rest.substr(std::strlen(q));
  fail("bert_published_parameters", "no published name for the encoder parameter '", ours, "'");
}

// One tensor the model expects: its published name, the module and the name inside it.
struct Slot {
  std::string published;
  nn::Module* module;
  std::string ours;
  Tensor param;
  bool required;  // the encoder's (embeddings, layers): a file without it is not a BERT checkpoint
};

std::vector<Slot> slots(const BertBundle& b) {
  std::vector<Slot> s;
  for (auto& [n, t] : b.bert->named_parameters())
    s.push_back({published_encoder_name(n), b.bert.get(), n, t, !starts_with(n, "pooler.")});
  if (b.mlm)
    for (auto& [n, t] : b.mlm->named_parameters()) s.push_back({"cls.predictions." + n, b.mlm.get(), n, t, false});
  if (b.nsp)
    for (auto& [n, t] : b.nsp->named_parameters()) s.push_back({"cls." + n, b.nsp.get(), n, t, false});
  for (auto& [prefix, m] : b.task_heads)
    for (auto& [n, t] : m->named_parameters()) s.push_back({prefix + "." + n, m.get(), n, t, false});
  return s;
}

bool encoder_namespace(const std::string& canonical) { return starts_with(canonical, "bert."); }

bool is_buffer(const std::string& canonical) {
  return canonical == "bert.embeddings.position_ids" || canonical == "bert.embeddings.token_type_ids";
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data<float>(), y.data<float>(), size_t(x.numel()) * sizeof(float)) == 0;
}

}  // namespace

models::BertConfig read_bert_config(const std::string& path) {
  try {
    return nlohmann::json::parse(read_file(path)).get<models::BertConfig>();
  } catch (const nlohmann::json::exception& e) {
    fail(path, "not valid JSON: ", e.what());
  } catch (const Error& e) {
    fail(path, e.what());
  }
}

std::string canonical_bert_name(const std::string& name) {
  std::string n = name;
  for (const char* bare : {"embeddings.", "encoder.", "pooler."})
    if (starts_with(n, bare)) n = "bert." + n;
  if (ends_with(n, "LayerNorm.gamma")) n = n.substr(0, n.size() - 5) + "weight";  // TF-era names
  if (ends_with(n, "LayerNorm.beta")) n = n.substr(0, n.size() - 4) + "bias";
  return n;
}

std::string BertLoadReport::summary() const {
  std::ostringstream o;
  o << "loaded " << loaded.size() << " tensors";
  if (!initialised.empty()) o << "; newly initialised " << initialised.size();
  if (!ignored.empty()) o << "; ignored " << ignored.size();
  o << "\n";
  for (auto& n : initialised) o << "  newly initialised: " << n << "\n";
  for (auto& n : ignored) o << "  ignored: " << n << "\n";
  return o.str();
}

BertBundle make_bert(const models::BertConfig& cfg, BertHeads heads, Generator& gen, BertTaskHeads task) {
  BertBundle b;
  b.config = cfg;
  b.bert = std::make_shared<models::Bert>(cfg, gen, nn::init::Scheme::normal_002, heads.pooler);
  if (heads.mlm) b.mlm = std::make_shared<models::BertMlmHead>(cfg, b.bert->embeddings->word_embeddings->weight, gen);
  if (heads.nsp) b.nsp = std::make_shared<models::BertNspHead>(cfg, gen);
  b.task_heads = std::move(task);
  return b;
}

std::map<std::string, Tensor> bert_published_parameters(const BertBundle& b) {
  QKV_CHECK(b.bert != nullptr, "bert_published_parameters", "no model");
  std::map<std::string, Tensor> out;
  for (auto& s : slots(b)) out[s.published] = s.param;
  return out;
}

namespace {

// The sizes config.json gives, against the file's header, before the model is built from them: a
// config.json edited to 30M positions allocated 1.9 GB before the shapes were compared. The
// embeddings and the first layer's FFN carry every width; a tensor the file lacks, and the number
// of layers, are left to the load's own checks and report.
void check_header_sizes(const std::string& weights, const models::BertConfig& c) {
  const safetensors::Reader header(weights);
  std::map<std::string, std::string> stored;  // canonical -> as stored
  for (const std::string& n : header.names()) stored.emplace(canonical_bert_name(n), n);
  const int64_t H = c.hidden_size;
  const std::pair<const char*, Shape> expected[] = {
      {"bert.embeddings.word_embeddings.weight", Shape{c.vocab_size, H}},
      {"bert.embeddings.position_embeddings.weight", Shape{c.max_position_embeddings, H}},
      {"bert.embeddings.token_type_embeddings.weight", Shape{c.type_vocab_size, H}},
      {"bert.encoder.layer.0.intermediate.dense.weight", Shape{c.intermediate_size, H}}};
  for (const auto& [name, shape] : expected)
    if (auto it = stored.find(name); it != stored.end())
      QKV_CHECK(header.shape(it->second) == shape, weights, "tensor '", it->second, "': expected shape ", shape.str(),
                " (config.json), got ", header.shape(it->second).str());
}

}  // namespace

BertBundle load_bert(const std::string& dir, BertHeads heads, BertTaskHeads task, kernels::MatmulPrecision precision) {
  const fs::path d(dir);
  const std::string cfg_path = (d / "config.json").string(), weights = (d / "model.safetensors").string();
  QKV_CHECK(fs::is_directory(d), dir, "not a BERT model directory (expected config.json, model.safetensors)");
  QKV_CHECK(fs::exists(cfg_path), cfg_path, "missing: a BERT model directory needs config.json");
  QKV_CHECK(fs::exists(weights), weights, "missing: a BERT model directory needs model.safetensors");
  // The encoder is built as zeros (every tensor of it is loaded next); the pooler and the heads
  // are drawn below if the file lacks them.
  BertBundle b;
  b.config = read_bert_config(cfg_path);
  check_header_sizes(weights, b.config);
  b.bert = std::make_shared<models::Bert>(b.config, default_generator(), nn::init::Scheme::none, heads.pooler);
  if (heads.mlm) b.mlm = std::make_shared<models::BertMlmHead>(b.config, b.bert->embeddings->word_embeddings->weight);
  if (heads.nsp) b.nsp = std::make_shared<models::BertNspHead>(b.config);
  b.task_heads = std::move(task);

  // The file's tensors under their canonical names; one name spelt two ways is an error. The
  // header is checked against the model first; then each tensor is read straight into its
  // parameter, so the file is never held beside the model (BERT-base: 418 MiB, not 836).
  const safetensors::Reader file(weights);
  std::map<std::string, std::string> stored;  // canonical -> as stored
  for (const std::string& name : file.names()) {
    const std::string c = canonical_bert_name(name);
    auto [it, fresh] = stored.emplace(c, name);
    QKV_CHECK(fresh, weights, "tensors '", it->second, "' and '", name, "' are the same parameter '", c, "'");
  }
  auto check_shape = [&](const std::string& name, const Tensor& param, const char* from) {
    QKV_CHECK(file.shape(name) == param.shape(), weights, "tensor '", name, "': expected shape ", param.shape().str(),
              from, ", got ", file.shape(name).str());
    QKV_CHECK(file.dtype(name) == DType::f32, weights, "tensor '", name, "': expected F32, got ",
              dtype_name(file.dtype(name)));
  };

  NoGradGuard ng;
  std::vector<std::pair<Tensor, std::string>> fills;  // parameter <- tensor as stored
  struct Copy {  // a tensor the file stores twice: the copy must equal the original (both as stored)
    std::string copy, original;
    const char* why;
  };
  std::vector<Copy> copies;
  std::set<std::string> used;
  for (auto& s : slots(b)) {
    auto it = stored.find(s.published);
    if (it == stored.end()) {
      QKV_CHECK(!s.required, weights, "tensor '", s.published, "' is missing (expected shape ", s.param.shape().str(),
                ")");
      b.report.initialised.push_back(s.published);
      continue;
    }
    check_shape(it->second, s.param, " (config.json)");
    fills.emplace_back(s.param, it->second);
    used.insert(s.published);
    b.report.loaded.push_back(s.published);
  }
  // The MLM decoder: tied to the word embeddings, its bias the head's own.
  if (b.mlm) {
    if (auto it = stored.find("cls.predictions.decoder.weight"); it != stored.end()) {
      copies.push_back({it->second, stored.at("bert.embeddings.word_embeddings.weight"),
                        "qkv's MLM decoder is tied to the word embeddings"});
      used.insert(it->first);
    }
    if (auto it = stored.find("cls.predictions.decoder.bias"); it != stored.end()) {
      if (!stored.count("cls.predictions.bias")) {  // only the decoder's copy stored: it is the head's bias
        check_shape(it->second, b.mlm->bias, "");
        fills.emplace_back(b.mlm->bias, it->second);
        std::erase(b.report.initialised, std::string("cls.predictions.bias"));
        b.report.loaded.push_back("cls.predictions.bias");
      } else {
        copies.push_back({it->second, stored.at("cls.predictions.bias"), "the decoder's bias is the head's bias"});
      }
      used.insert(it->first);
    }
  }
  // Everything else: unknown encoder or requested-head tensors are errors, the rest is ignored.
  for (auto& [c, name] : stored) {
    if (used.count(c)) continue;
    bool requested_head = (b.mlm && starts_with(c, "cls.predictions.")) || (b.nsp && starts_with(c, "cls.seq_relationship."));
    for (auto& h : b.task_heads) requested_head |= starts_with(c, h.first + ".");
    const bool unbuilt_pooler = !b.bert->pooler && starts_with(c, "bert.pooler.");
    QKV_CHECK(is_buffer(c) || unbuilt_pooler || !(encoder_namespace(c) || requested_head), weights, "tensor '", name,
              "' is not part of a BERT with this config.json (", b.config.num_hidden_layers, " layers, hidden_size ",
              b.config.hidden_size, ")");
    b.report.ignored.push_back(name);
  }
  // A checkpoint without a pooler (BertForMaskedLM, token classification, QA): Hugging Face's
  // initialisation, then whatever part of it the file has.
  if (b.bert->pooler && !used.count("bert.pooler.dense.weight"))
    nn::initialize(*b.bert->pooler, nn::init::Scheme::normal_002);
  for (const Copy& c : copies)  // from the file, before anything is loaded (or held in bf16); rare
    QKV_CHECK(same_bits(file.read(c.copy), file.read(c.original)), weights, "tensor '", c.copy, "' differs from '",
              c.original, "': ", c.why);
  // bf16 / int8: held before any weight is read, so the f32 ones are never touched.
  b.bert->hold_weights(precision);
  if (b.mlm) b.mlm->hold_weights(precision);
  if (b.nsp) b.nsp->hold_weights(precision);
  for (auto& [prefix, m] : b.task_heads) m->hold_weights(precision);
  for (auto& [param, name] : fills) {
    Tensor p = param;
    nn::read_parameter(file, name, p);
  }

  if (fs::exists(d / "tokenizer.json") || fs::exists(d / "vocab.txt")) {
    b.tokenizer = text::load_tokenizer(dir);
    const std::string tok_file = (d / (fs::exists(d / "tokenizer.json") ? "tokenizer.json" : "vocab.txt")).string();
    QKV_CHECK(b.tokenizer->vocab_size() <= b.config.vocab_size, tok_file, "the tokenizer has ",
              b.tokenizer->vocab_size(), " ids but config.json's vocab_size is ", b.config.vocab_size);
  }
  b.bert->eval();
  if (b.mlm) b.mlm->eval();
  if (b.nsp) b.nsp->eval();
  for (auto& h : b.task_heads) h.second->eval();
  return b;
}

void save_bert(const std::string& dir, const BertBundle& b) {
  QKV_CHECK(b.bert != nullptr, "save_bert", "no model to save");
  fs::create_directories(dir);
  const fs::path d(dir);
  nlohmann::json config = b.bert->config();
  config["architectures"] = {b.mlm && b.nsp ? "BertForPreTraining" : b.mlm ? "BertForMaskedLM" : "BertModel"};
  config.update(b.config_extra);
  write_file_atomic((d / "config.json").string(), config.dump(2) + "\n");
  NoGradGuard ng;
  std::map<std::string, Tensor> tensors;
  for (auto& [name, t] : bert_published_parameters(b)) tensors[name] = t.detach().contiguous();
  safetensors::save((d / "model.safetensors").string(), tensors, {{"format", "pt"}});
  if (b.tokenizer) save_bert_tokenizer(dir, *b.tokenizer);
}

void save_bert_tokenizer(const std::string& dir, const text::Tokenizer& tokenizer) {
  const fs::path d(dir);
  tokenizer.save((d / "tokenizer.json").string());
  if (auto* wp = dynamic_cast<const text::ListVocabTokenizer*>(&tokenizer); wp && tokenizer.kind() == "wordpiece") {
    std::string lines;  // BertTokenizer's vocab.txt: one token per line, line number = id
    for (auto& tok : wp->vocab()) lines += tok + "\n";
    write_file_atomic((d / "vocab.txt").string(), lines);
  }
}

}  // namespace qkv::io
