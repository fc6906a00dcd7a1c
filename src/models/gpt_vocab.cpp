#include "qkv/models/gpt_vocab.h"

#include "qkv/autograd/node.h"

namespace qkv::models {

std::shared_ptr<Gpt> grow_vocab(const Gpt& model, int64_t new_vocab, Generator& gen) {
  GptConfig cfg = model.config();
  const int64_t V = cfg.vocab_size, D = cfg.n_embd;
  QKV_CHECK(new_vocab >= V, "grow_vocab", "the vocabulary can only grow: the model has ", V, " tokens, asked for ",
            new_vocab);
  cfg.vocab_size = new_vocab;
  Generator scratch(0);  // the new model's own initialisation is overwritten below
  auto grown = std::make_shared<Gpt>(cfg, scratch);
  std::map<std::string, Tensor> sd = model.state_dict();
  const Tensor& old = sd.at("embed_tokens.weight");  // (V, D)
  QKV_CHECK(old.dtype() == DType::f32, "grow_vocab", "expected an f32 token embedding, got ", dtype_name(old.dtype()));
  Tensor e = Tensor::empty({new_vocab, D}, DType::f32);  // (V', D)
  {
    NoGradGuard ng;
    Tensor src = old.contiguous();
    std::copy_n(src.data<float>(), V * D, e.data<float>());
  }
  gen.normal(e.data<float>() + V * D, (new_vocab - V) * D, 0.f, 0.02f);
  sd["embed_tokens.weight"] = e;
  grown->load_state_dict(sd, /*strict=*/true, "grow_vocab");
  grown->train(model.is_training());
  return grown;
}

}  // namespace qkv::models
