// qkv/nn/init.h - parameter initialisation schemes (in place, not recorded), all drawing from a
// qkv::Generator so a seed reproduces a model exactly.
#pragma once
#include "qkv/tensor/rng.h"
#include "qkv/tensor/tensor.h"

namespace qkv::nn::init {

void uniform(Tensor& t, double lo, double hi, Generator& g = default_generator());
void normal(Tensor& t, double mean, double std, Generator& g = default_generator());
void constant(Tensor& t, double value);
// Glorot & Bengio 2010: U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)); the Transformer
// paper's and the Annotated Transformer's choice for every matrix.
void xavier_uniform(Tensor& t, double gain = 1.0, Generator& g = default_generator());
// PyTorch's nn.Linear default: kaiming_uniform(a = sqrt(5)) = U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
void kaiming_uniform_linear(Tensor& t, Generator& g = default_generator());
// fan_in / fan_out of a weight (out, in, ...) as PyTorch computes them.
std::pair<int64_t, int64_t> fans(const Tensor& t);

// How a model initialises its parameters.
enum class Scheme {
  pytorch_default,  // Linear: kaiming-uniform weight + uniform bias; Embedding: N(0, 1)
  xavier_uniform,   // matrices Xavier-uniform, biases zero (the Transformer paper)
  normal_002,       // matrices and embeddings N(0, 0.02), biases zero (GPT, BERT)
  none,             // all zeros, no random draws: for a model whose every tensor is loaded next
                    // (Linear and Embedding weights: Tensor::zeros_to_fill, no memory until filled)
};

}  // namespace qkv::nn::init
