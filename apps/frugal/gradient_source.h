// A real gradient for `frugal bench polar --source gradient:MODEL[:STEPS]`: the model trained for
// STEPS steps of SGD on Fashion-MNIST in this process, then the gradient of the mean loss over the
// next batch, every parameter's flattened in registration order. Built with frugal_torch only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "frugal/status.h"

namespace frugal::apps {

struct GradientSourceOptions {
  std::string model = "cnn";
  int steps = 100;  // SGD steps (lr 0.05, momentum 0.9, batch 64) before the gradient
  int batch = 64;
  uint64_t seed = 1;
};

// Parses "gradient:MODEL" or "gradient:MODEL:STEPS" (kInvalidArgument otherwise).
StatusOr<GradientSourceOptions> ParseGradientSource(const std::string& source);

// kNotFound without the dataset, kInvalidArgument for an unknown model; kFailedPrecondition in a
// build without frugal_torch.
StatusOr<std::vector<float>> TrainedGradient(const GradientSourceOptions& options);

}  // namespace frugal::apps
