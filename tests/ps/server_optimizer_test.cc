// The servers' SGD against the formula written out by hand.
#include "ps/server_optimizer.h"

#include <gtest/gtest.h>

namespace frugal::ps_internal {
namespace {

TEST(ServerSgd, PlainMomentumNesterovAndWeightDecay) {
  ServerOptimizer opt;
  KeyOptimizerState state;
  std::vector<float> x = {1, -2};
  std::vector<float> g = {0.5f, 0.25f};
  ApplySgd(opt, 0.1, x, g, state);  // plain: x - 0.1 g
  EXPECT_FLOAT_EQ(x[0], 0.95f);
  EXPECT_FLOAT_EQ(x[1], -2.025f);
  EXPECT_TRUE(state.momentum.empty());

  opt.momentum = 0.9;
  opt.weight_decay = 0.01;
  x = {1, -2};
  g = {0.5f, 0.25f};
  ApplySgd(opt, 0.1, x, g, state);  // d = g + 0.01 x; m = d; x -= 0.1 m
  const float d0 = 0.5f + 0.01f * 1, d1 = 0.25f + 0.01f * -2;
  EXPECT_FLOAT_EQ(state.momentum[0], d0);
  EXPECT_FLOAT_EQ(x[0], 1 - 0.1f * d0);
  EXPECT_FLOAT_EQ(x[1], -2 - 0.1f * d1);
  const float x0 = x[0];
  g = {1, 1};
  ApplySgd(opt, 0.1, x, g, state);  // m = 0.9 m + d
  const float e0 = 1 + 0.01f * x0;
  const float m0 = 0.9f * d0 + e0;
  EXPECT_FLOAT_EQ(state.momentum[0], m0);
  EXPECT_FLOAT_EQ(x[0], x0 - 0.1f * m0);

  opt.nesterov = true;
  opt.weight_decay = 0;
  KeyOptimizerState fresh;
  x = {1};
  g = {2};
  ApplySgd(opt, 0.5, x, g, fresh);  // m = 2, d = 2 + 0.9 * 2
  EXPECT_FLOAT_EQ(x[0], 1 - 0.5f * (2 + 0.9f * 2));
}

}  // namespace
}  // namespace frugal::ps_internal
