// Non-finite gradients (NaN, infinity), found as backward produces them: internal to the step
// driver (step_driver.h).
//
// A hook on every trainable parameter, registered before any other hook (so before the engine's,
// which submits the gradient), checks the gradient; the first parameter of the step whose gradient
// is not finite is remembered and, with `zero_bad`, its gradient is replaced by zeros, so that the
// NaN never reaches the engine or a peer. An injection puts a NaN into one parameter's gradient
// in one step (--inject nan), before the check.
//
// Not thread safe: hooks run on the thread that runs backward, the training thread. The module
// must outlive the guard; the destructor removes the hooks.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frugal/status.h"
#include "frugal_torch/nan_policy.h"

namespace frugal_torch::internal {

class NanGuard {
 public:
  // kInvalidArgument when the injection names no trainable parameter (the message lists them).
  static frugal::StatusOr<std::unique_ptr<NanGuard>> Create(torch::nn::Module& module,
                                                            bool zero_bad,
                                                            std::optional<NanFault> injection);
  ~NanGuard();
  NanGuard(const NanGuard&) = delete;
  NanGuard& operator=(const NanGuard&) = delete;

  // Step `step` over the run begins, step `step_in_epoch` of epoch `epoch` (from 1): forgets the
  // last step's finding.
  void BeginStep(int64_t step, int64_t epoch, int64_t step_in_epoch);
  // The name of the first parameter whose gradient was not finite in this step, or nullptr.
  const std::string* bad_tensor() const {
    return bad_ ? &params_[static_cast<size_t>(*bad_)].name : nullptr;
  }

 private:
  struct Param {
    torch::Tensor tensor;
    std::string name;
    std::optional<unsigned> hook;  // set once registered
  };
  NanGuard(bool zero_bad, std::optional<NanFault> injection)
      : zero_bad_(zero_bad), injection_(std::move(injection)) {}
  torch::Tensor OnGradient(size_t index, const torch::Tensor& grad);

  bool zero_bad_;
  std::optional<NanFault> injection_;
  std::optional<size_t> inject_index_;
  std::vector<Param> params_;
  bool inject_now_ = false;
  std::optional<size_t> bad_;
};

}  // namespace frugal_torch::internal
