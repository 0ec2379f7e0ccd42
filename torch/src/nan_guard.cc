// Non-finite gradient detection (see nan_guard.h).
//
// AllFinite reads a float32 gradient once and ORs, per value, whether its exponent bits are all
// ones (infinity or NaN): integer operations that the compiler vectorises, about a memory pass.
#include "nan_guard.h"

#include <fmt/format.h>

#include <cstring>
#include <limits>

namespace frugal_torch {

frugal::StatusOr<NanPolicy> ParseNanPolicy(std::string_view name) {
  if (name == "abort") return NanPolicy::kAbort;
  if (name == "skip") return NanPolicy::kSkip;
  return frugal::InvalidArgumentError(
      fmt::format("unknown --nan-policy '{}' (accepted: abort, skip)", name));
}

namespace internal {
namespace {

bool AllFinite(const torch::Tensor& grad) {
  const torch::Tensor c = grad.contiguous();
  if (c.scalar_type() != torch::kFloat) return torch::isfinite(c).all().item<bool>();
  const float* data = c.data_ptr<float>();
  const int64_t n = c.numel();
  uint32_t any = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, data + i, sizeof(bits));
    any |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return any == 0;
}

}  // namespace

frugal::StatusOr<std::unique_ptr<NanGuard>> NanGuard::Create(torch::nn::Module& module,
                                                             bool zero_bad,
                                                             std::optional<NanFault> injection) {
  std::unique_ptr<NanGuard> guard(new NanGuard(zero_bad, std::move(injection)));
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    if (!item.value().requires_grad()) continue;
    guard->params_.push_back({item.value(), item.key(), std::nullopt});
  }
  if (guard->injection_) {
    const std::string& wanted = guard->injection_->tensor;
    for (size_t i = 0; i < guard->params_.size(); ++i) {
      if (wanted.empty() || guard->params_[i].name == wanted) {
        guard->inject_index_ = i;
        break;
      }
    }
    if (!guard->inject_index_) {
      std::string names;
      for (const Param& p : guard->params_) names += (names.empty() ? "" : ", ") + p.name;
      return frugal::InvalidArgumentError(fmt::format(
          "--inject nan: the model has no parameter '{}' (parameters: {})", wanted, names));
    }
  }
  NanGuard* self = guard.get();
  for (size_t i = 0; i < guard->params_.size(); ++i) {
    guard->params_[i].hook = guard->params_[i].tensor.register_hook(
        [self, i](const torch::Tensor& grad) { return self->OnGradient(i, grad); });
  }
  return guard;
}

NanGuard::~NanGuard() {
  // A guard refused before its hooks were registered (Create) has none to remove.
  for (Param& p : params_) {
    if (p.hook) p.tensor.remove_hook(*p.hook);
  }
}

void NanGuard::BeginStep(int64_t step, int64_t epoch, int64_t step_in_epoch) {
  inject_now_ = injection_ && (injection_->epoch > 0
                                   ? injection_->epoch == epoch && injection_->step == step_in_epoch
                                   : injection_->step == step);
  bad_.reset();
}

torch::Tensor NanGuard::OnGradient(size_t index, const torch::Tensor& grad) {
  torch::Tensor g = grad;
  if (inject_now_ && inject_index_ == index) {
    g = grad.clone();
    g.view({-1})[0] = std::numeric_limits<float>::quiet_NaN();
  }
  if (!AllFinite(g)) {
    if (!bad_) bad_ = index;
    if (zero_bad_) return torch::zeros_like(g);
  }
  return g;
}

}  // namespace internal
}  // namespace frugal_torch
