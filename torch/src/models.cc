// Model definitions and their seeded initialisation.
//
// ResNet20: a 3x3 stem convolution to 16 channels, then three stages of three BasicBlocks
// (conv3x3-BN-ReLU-conv3x3-BN, plus the shortcut, then ReLU) with 16, 32 and 64 channels; the
// first block of stages 2 and 3 halves the resolution (28 -> 14 -> 7) with stride 2. Where the
// shape changes the shortcut is He et al.'s option A: the input subsampled by 2 in both spatial
// dimensions and zero-padded in the channel dimension, which adds no parameters. Global average
// pooling and a 64-10 linear layer finish it.
//
// Initialise: after construction every Linear and Conv2d weight and bias is redrawn from a CPU
// generator seeded with `seed`, in registration order: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) —
// what torch's default kaiming_uniform(a = sqrt(5)) amounts to — or, for the convolutions of
// resnet20, the He-normal N(0, 2/fan_out) of the paper. Batch-norm layers keep weight 1, bias 0.
// LSTM weights and biases are drawn from U(-1/sqrt(hidden), 1/sqrt(hidden)) and embeddings from
// N(0, 1), torch's defaults.
#include "frugal_torch/models.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <string>
#include <vector>

#include "frugal_torch/text_corpus.h"
#include "frugal_torch/trainer.h"

namespace frugal_torch {
namespace {

namespace nn = torch::nn;

class Mlp : public Classifier {
 public:
  Mlp()
      : fc1_(register_module("fc1", nn::Linear(784, 256))),
        fc2_(register_module("fc2", nn::Linear(256, 256))),
        fc3_(register_module("fc3", nn::Linear(256, 10))) {}

  torch::Tensor forward(torch::Tensor x) override {
    x = x.flatten(1);
    x = torch::relu(fc1_(x));
    x = torch::relu(fc2_(x));
    return fc3_(x);
  }

 private:
  nn::Linear fc1_, fc2_, fc3_;
};

class Cnn : public Classifier {
 public:
  Cnn()
      : conv1_(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, 32, 5).padding(2)))),
        conv2_(register_module("conv2", nn::Conv2d(nn::Conv2dOptions(32, 64, 5).padding(2)))),
        fc1_(register_module("fc1", nn::Linear(64 * 7 * 7, 128))),
        fc2_(register_module("fc2", nn::Linear(128, 10))) {}

  torch::Tensor forward(torch::Tensor x) override {
    x = torch::max_pool2d(torch::relu(conv1_(x)), 2);
    x = torch::max_pool2d(torch::relu(conv2_(x)), 2);
    x = torch::relu(fc1_(x.flatten(1)));
    return fc2_(x);
  }

 private:
  nn::Conv2d conv1_, conv2_;
  nn::Linear fc1_, fc2_;
};

nn::Conv2d Conv3x3(int64_t in, int64_t out, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}

class BasicBlock : public nn::Module {
 public:
  BasicBlock(int64_t in, int64_t out, int64_t stride)
      : conv1_(register_module("conv1", Conv3x3(in, out, stride))),
        bn1_(register_module("bn1", nn::BatchNorm2d(out))),
        conv2_(register_module("conv2", Conv3x3(out, out, 1))),
        bn2_(register_module("bn2", nn::BatchNorm2d(out))),
        stride_(stride),
        pad_(out - in) {}

  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor y = torch::relu(bn1_(conv1_(x)));
    y = bn2_(conv2_(y));
    torch::Tensor shortcut = x;
    if (stride_ != 1) {
      using torch::indexing::None;
      using torch::indexing::Slice;
      shortcut = shortcut.index(
          {Slice(), Slice(), Slice(None, None, stride_), Slice(None, None, stride_)});
    }
    if (pad_ > 0) {
      shortcut = torch::constant_pad_nd(shortcut, {0, 0, 0, 0, pad_ / 2, pad_ - pad_ / 2});
    }
    return torch::relu(y + shortcut);
  }

 private:
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  nn::Conv2d conv2_;
  nn::BatchNorm2d bn2_;
  int64_t stride_;
  int64_t pad_;
};

class ResNet20 : public Classifier {
 public:
  ResNet20()
      : conv_(register_module("conv", Conv3x3(1, 16, 1))),
        bn_(register_module("bn", nn::BatchNorm2d(16))),
        fc_(register_module("fc", nn::Linear(64, 10))) {
    int64_t in = 16;
    const int64_t widths[] = {16, 32, 64};
    for (int stage = 0; stage < 3; ++stage) {
      for (int block = 0; block < 3; ++block) {
        const int64_t stride = (stage > 0 && block == 0) ? 2 : 1;
        blocks_.push_back(
            register_module("layer" + std::to_string(stage + 1) + "_" + std::to_string(block),
                            std::make_shared<BasicBlock>(in, widths[stage], stride)));
        in = widths[stage];
      }
    }
  }

  torch::Tensor forward(torch::Tensor x) override {
    x = torch::relu(bn_(conv_(x)));
    for (auto& block : blocks_) x = block->forward(x);
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    return fc_(x);
  }

 private:
  nn::Conv2d conv_;
  nn::BatchNorm2d bn_;
  nn::Linear fc_;
  std::vector<std::shared_ptr<BasicBlock>> blocks_;
};

class Vgg : public Classifier {
 public:
  Vgg() {
    const int kPool = 0;
    const int config[] = {64, 64, kPool, 128, 128, kPool, 256, 256, 256, kPool};
    nn::Sequential features;
    int64_t in = 1;
    for (int width : config) {
      if (width == kPool) {
        features->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2)));
      } else {
        features->push_back(nn::Conv2d(nn::Conv2dOptions(in, width, 3).padding(1)));
        features->push_back(nn::BatchNorm2d(width));
        features->push_back(nn::ReLU());
        in = width;
      }
    }
    features_ = register_module("features", features);
    classifier_ = register_module(
        "classifier", nn::Sequential(nn::Linear(256 * 3 * 3, 1024), nn::ReLU(),
                                     nn::Linear(1024, 1024), nn::ReLU(), nn::Linear(1024, 10)));
  }

  torch::Tensor forward(torch::Tensor x) override {
    return classifier_->forward(features_->forward(x).flatten(1));
  }

 private:
  nn::Sequential features_{nullptr};
  nn::Sequential classifier_{nullptr};
};

// The character-level language model: codes (N x 1 x 1 x L floats, text_corpus.h) -> embedding
// of kCharEmbedding -> two LSTM layers of kCharHidden units -> a linear decoder at every
// position; logits N x kCharVocabulary x L, the layout cross_entropy takes with N x L targets.
constexpr int64_t kCharEmbedding = 8;
constexpr int64_t kCharHidden = 128;

class CharLstm : public Classifier {
 public:
  CharLstm()
      : embedding_(register_module("embedding", nn::Embedding(kCharVocabulary, kCharEmbedding))),
        lstm_(register_module(
            "lstm",
            nn::LSTM(
                nn::LSTMOptions(kCharEmbedding, kCharHidden).num_layers(2).batch_first(true)))),
        decoder_(register_module("decoder", nn::Linear(kCharHidden, kCharVocabulary))) {}

  torch::Tensor forward(torch::Tensor x) override {
    const torch::Tensor codes = x.flatten(1).to(torch::kLong);
    const torch::Tensor hidden = std::get<0>(lstm_->forward(embedding_(codes)));
    return decoder_(hidden).transpose(1, 2);
  }

 private:
  nn::Embedding embedding_;
  nn::LSTM lstm_;
  nn::Linear decoder_;
};

void Initialise(nn::Module& model, uint64_t seed, bool he_normal_convs) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  torch::NoGradGuard no_grad;
  for (const auto& module : model.modules(/*include_self=*/false)) {
    torch::Tensor weight;
    torch::Tensor bias;
    bool conv = false;
    if (auto* lstm = module->as<nn::LSTM>()) {
      const double bound = 1.0 / std::sqrt(static_cast<double>(lstm->options.hidden_size()));
      for (torch::Tensor& p : lstm->all_weights()) p.uniform_(-bound, bound, generator);
      continue;
    }
    if (auto* embedding = module->as<nn::Embedding>()) {
      embedding->weight.normal_(0.0, 1.0, generator);
      continue;
    }
    if (auto* linear = module->as<nn::Linear>()) {
      weight = linear->weight;
      bias = linear->bias;
    } else if (auto* conv2d = module->as<nn::Conv2d>()) {
      weight = conv2d->weight;
      bias = conv2d->bias;
      conv = true;
    } else {
      continue;
    }
    const int64_t fan_in = weight.numel() / weight.size(0);
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    if (conv && he_normal_convs) {
      const int64_t fan_out = weight.numel() / weight.size(1);
      weight.normal_(0.0, std::sqrt(2.0 / static_cast<double>(fan_out)), generator);
    } else {
      weight.uniform_(-bound, bound, generator);
    }
    if (bias.defined()) bias.uniform_(-bound, bound, generator);
  }
}

}  // namespace

std::vector<std::string> ModelNames() { return {"mlp", "cnn", "resnet20", "vgg", "charlstm"}; }

frugal::StatusOr<std::shared_ptr<Classifier>> MakeModel(std::string_view name, uint64_t seed) {
  std::shared_ptr<Classifier> model;
  if (name == "mlp") {
    model = std::make_shared<Mlp>();
  } else if (name == "cnn") {
    model = std::make_shared<Cnn>();
  } else if (name == "resnet20") {
    model = std::make_shared<ResNet20>();
  } else if (name == "vgg") {
    model = std::make_shared<Vgg>();
  } else if (name == "charlstm") {
    model = std::make_shared<CharLstm>();
  } else {
    std::string known;
    for (const std::string& n : ModelNames()) known += (known.empty() ? "" : ", ") + n;
    return frugal::InvalidArgumentError("unknown model '" + std::string(name) +
                                        "' (known: " + known + ")");
  }
  Initialise(*model, seed, /*he_normal_convs=*/name == "resnet20");
  return model;
}

int64_t CountParameters(const torch::nn::Module& module) {
  int64_t count = 0;
  for (const auto& p : module.parameters()) count += p.numel();
  return count;
}

}  // namespace frugal_torch
