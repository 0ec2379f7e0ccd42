// The models frugal trains on Fashion-MNIST (input N x 1 x 28 x 28, output N x 10 logits):
//   mlp       784-256-256-10 with ReLU
//   cnn       conv5x5(32)-pool-conv5x5(64)-pool-fc(128)-fc(10), about 0.46M parameters
//   resnet20  He et al.'s CIFAR ResNet-20 (3 stages of 3 basic blocks, 16/32/64 channels,
//             parameter-free shortcuts) on 1 x 28 x 28 inputs
//   vgg       a wide VGG-style net (64,64,M,128,128,M,256,256,256,M with batch norm, then
//             2304-1024-1024-10), about 5.2M parameters, so that communication dominates on
//             slow networks
//   charlstm  a character-level language model for the fortunes corpus (text_corpus.h): input
//             N x 1 x 1 x L character codes, embedding 8, two LSTM layers of 128, a linear
//             decoder at every position: output N x 97 x L logits (about 0.22M parameters)
// MakeModel initialises every parameter from a generator seeded with `seed` (the distributions
// of torch's defaults; He-normal convolutions for resnet20), so equal seeds give equal models
// without touching torch's process-wide generator.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "frugal/status.h"

namespace frugal_torch {

class Classifier : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor x) = 0;
};

// kInvalidArgument for an unknown name (the message lists the known ones).
frugal::StatusOr<std::shared_ptr<Classifier>> MakeModel(std::string_view name, uint64_t seed);

// Elements of all parameters (trainable or not), without buffers.
int64_t CountParameters(const torch::nn::Module& module);

}  // namespace frugal_torch
