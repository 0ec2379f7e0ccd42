// torch's SGD step on float buffers (see server_optimizer.h). The arithmetic follows
// torch/optim/sgd.cpp of LibTorch 1.13 operation by operation, in float, so that a server's update
// matches the workers' under all-reduce to within the order of the gradient sums:
//   d = g + weight_decay * x                  (g.add(x, weight_decay))
//   m = d (first), else m = momentum * m + d  (buf.mul_(momentum).add_(d, 1 - dampening))
//   d = d + momentum * m (Nesterov), else d = m
//   x = x - lr * d                            (p.add_(d, -lr))
#include "ps/server_optimizer.h"

#include "frugal/check.h"

namespace frugal::ps_internal {

void ApplySgd(const ServerOptimizer& optimizer, double lr, std::span<float> x,
              std::span<float> gradient, KeyOptimizerState& state) {
  FRUGAL_CHECK_EQ(gradient.size(), x.size(), "server update");
  const size_t n = x.size();
  const float wd = static_cast<float>(optimizer.weight_decay);
  const float mu = static_cast<float>(optimizer.momentum);
  const float neg_lr = static_cast<float>(-lr);
  float* d = gradient.data();
  if (wd != 0) {
    for (size_t i = 0; i < n; ++i) d[i] = d[i] + wd * x[i];
  }
  if (mu != 0) {
    if (state.momentum.empty()) {
      state.momentum.assign(d, d + n);
    } else {
      float* m = state.momentum.data();
      for (size_t i = 0; i < n; ++i) m[i] = m[i] * mu + d[i];
    }
    const float* m = state.momentum.data();
    if (optimizer.nesterov) {
      for (size_t i = 0; i < n; ++i) d[i] = d[i] + mu * m[i];
    } else {
      for (size_t i = 0; i < n; ++i) d[i] = m[i];
    }
  }
  for (size_t i = 0; i < n; ++i) x[i] = x[i] + neg_lr * d[i];
}

}  // namespace frugal::ps_internal
