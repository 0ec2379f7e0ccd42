// The non-finite gradient guard of the step driver (torch/src/nan_guard.h): what a hook
// registered after it — the engine's, which submits the gradient to the peers — receives.
#include "nan_guard.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <optional>
#include <string>

namespace frugal_torch::internal {
namespace {

struct Net : torch::nn::Module {
  Net() {
    torch::manual_seed(3);
    fc1 = register_module("fc1", torch::nn::Linear(4, 3));
    fc2 = register_module("fc2", torch::nn::Linear(3, 2));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

// What the hook registered after the guard saw of fc2.weight's gradient in one backward pass.
torch::Tensor GradientSeenLater(Net& net, NanGuard& guard, const torch::Tensor& input,
                                int64_t step) {
  torch::Tensor seen;
  const unsigned hook = net.fc2->weight.register_hook(
      [&seen](const torch::Tensor& grad) { seen = grad.clone(); });
  guard.BeginStep(step, /*epoch=*/1, step);
  net.zero_grad();
  net.forward(input).sum().backward();
  net.fc2->weight.remove_hook(hook);
  return seen;
}

TEST(NanGuard, AnInjectedNanNeverReachesALaterHookUnderAbort) {
  Net net;
  auto guard = NanGuard::Create(net, /*zero_bad=*/true, NanFault{0, 2, 0, "fc2.weight"});
  ASSERT_TRUE(guard.ok()) << guard.status().ToString();
  const torch::Tensor x = torch::ones({5, 4});
  // Step 1: nothing injected, the gradient passes unchanged.
  const torch::Tensor clean = GradientSeenLater(net, **guard, x, 1);
  EXPECT_TRUE(torch::isfinite(clean).all().item<bool>());
  EXPECT_GT(clean.abs().sum().item<float>(), 0.0f);
  EXPECT_EQ((*guard)->bad_tensor(), nullptr);
  // Step 2: the NaN is found and named; the later hook receives zeros.
  const torch::Tensor seen = GradientSeenLater(net, **guard, x, 2);
  ASSERT_NE((*guard)->bad_tensor(), nullptr);
  EXPECT_EQ(*(*guard)->bad_tensor(), "fc2.weight");
  EXPECT_TRUE(torch::equal(seen, torch::zeros_like(seen)));
  EXPECT_TRUE(torch::isfinite(net.fc2->weight.grad()).all().item<bool>());
}

TEST(NanGuard, WithoutZeroingALaterHookSeesTheNan) {
  // The skip policy agrees with the peers before sending: the guard only names the tensor.
  Net net;
  auto guard = NanGuard::Create(net, /*zero_bad=*/false, NanFault{0, 2, 0, "fc2.weight"});
  ASSERT_TRUE(guard.ok());
  const torch::Tensor seen = GradientSeenLater(net, **guard, torch::ones({5, 4}), 2);
  ASSERT_NE((*guard)->bad_tensor(), nullptr);
  EXPECT_FALSE(torch::isfinite(seen).all().item<bool>());
}

TEST(NanGuard, ANaturalInfinityIsFoundAndZeroed) {
  Net net;
  auto guard = NanGuard::Create(net, /*zero_bad=*/true, std::nullopt);
  ASSERT_TRUE(guard.ok());
  torch::Tensor x = torch::ones({5, 4});
  x[2][1] = std::numeric_limits<float>::infinity();
  const torch::Tensor seen = GradientSeenLater(net, **guard, x, 0);
  ASSERT_NE((*guard)->bad_tensor(), nullptr);
  EXPECT_TRUE(torch::isfinite(seen).all().item<bool>());
}

TEST(NanGuard, AnInjectionIntoAMissingParameterIsRefused) {
  Net net;
  auto guard = NanGuard::Create(net, true, NanFault{0, 1, 0, "fc9.weight"});
  ASSERT_FALSE(guard.ok());
  EXPECT_NE(guard.status().message().find("no parameter 'fc9.weight'"), std::string::npos);
  EXPECT_NE(guard.status().message().find("fc1.weight"), std::string::npos);
}

}  // namespace
}  // namespace frugal_torch::internal
