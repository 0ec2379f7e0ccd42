// The training for a gradient source: a plain single-process loop (no strategy, no transport) over
// the first STEPS batches of one shuffled epoch, then one more batch whose gradient is returned.
#include "gradient_source.h"

#include <fmt/format.h>

#include <charconv>

#if defined(FRUGAL_HAVE_TRAIN_COMMAND)
#include <torch/torch.h>

#include "frugal_torch/data.h"
#include "frugal_torch/models.h"
#endif

namespace frugal::apps {

StatusOr<GradientSourceOptions> ParseGradientSource(const std::string& source) {
  const std::string prefix = "gradient:";
  GradientSourceOptions options;
  if (source.rfind(prefix, 0) != 0 || source.size() == prefix.size()) {
    return InvalidArgumentError(
        fmt::format("--source {}: expected gradient:MODEL or gradient:MODEL:STEPS", source));
  }
  std::string rest = source.substr(prefix.size());
  const size_t colon = rest.find(':');
  options.model = rest.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string steps = rest.substr(colon + 1);
    auto [end, ec] = std::from_chars(steps.data(), steps.data() + steps.size(), options.steps);
    if (ec != std::errc() || end != steps.data() + steps.size() || options.steps < 0 ||
        options.steps > 100000) {
      return InvalidArgumentError(
          fmt::format("--source {}: STEPS '{}' is not a count in [0, 100000]", source, steps));
    }
  }
  return options;
}

StatusOr<std::vector<float>> TrainedGradient(const GradientSourceOptions& options) {
#if defined(FRUGAL_HAVE_TRAIN_COMMAND)
  FRUGAL_ASSIGN_OR_RETURN(frugal_torch::FashionMnist data, frugal_torch::LoadFashionMnist());
  FRUGAL_ASSIGN_OR_RETURN(std::shared_ptr<frugal_torch::Classifier> model,
                          frugal_torch::MakeModel(options.model, options.seed));
  const frugal_torch::ImageSet& train = data.train;
  const torch::Tensor images =
      torch::from_blob(const_cast<float*>(train.images.data()),
                       {train.count, 1, train.rows, train.cols}, torch::kFloat);
  const torch::Tensor labels =
      torch::from_blob(const_cast<uint8_t*>(train.labels.data()), {train.count}, torch::kUInt8)
          .to(torch::kLong);
  std::vector<int64_t> order = frugal_torch::IidPermutation(train.count, options.seed, 0);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  model->train();
  const int64_t batches = train.count / options.batch;
  for (int step = 0; step <= options.steps; ++step) {
    const int64_t first = (step % batches) * options.batch;
    const torch::Tensor index =
        torch::from_blob(order.data() + first, {options.batch}, torch::kLong);
    sgd.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(
        model->forward(images.index_select(0, index)), labels.index_select(0, index));
    loss.backward();
    if (step < options.steps) sgd.step();
  }
  std::vector<float> gradient;
  for (const torch::Tensor& p : model->parameters()) {
    const torch::Tensor g = p.grad().detach().contiguous();
    gradient.insert(gradient.end(), g.data_ptr<float>(), g.data_ptr<float>() + g.numel());
  }
  return gradient;
#else
  return FailedPreconditionError(
      "--source gradient:... needs a build with frugal_torch (LibTorch)");
#endif
}

}  // namespace frugal::apps
