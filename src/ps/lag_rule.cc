// LAG's worker-side rule (see lag_rule.h). With plain gradient descent the server's step is
// x_{v+1} - x_v = -alpha gbar_v, so the paper's threshold (1 / (alpha^2 W^2)) sum_d xi_d
// ||x_{v+1-d} - x_{v-d}||^2 (with the sum of W gradients as the step) is sum_d xi_d ||gbar||^2 of
// the recent updates; with xi_d = xi / window that is what Decide compares against. The server
// sends ||gbar||^2 with every answer, so the rule needs neither the learning rate nor the
// parameters' history, and holds with momentum on the server too.
#include "ps/lag_rule.h"

#include <fmt/format.h>

#include <numeric>

namespace frugal::ps_internal {

bool LagKeyRule::Decide(std::span<const float> gradient) {
  bool upload = !uploaded_ || skips_ >= options_.max_skip || last_.size() != gradient.size();
  if (!upload) {
    double change = 0;
    for (size_t i = 0; i < gradient.size(); ++i) {
      const double d = static_cast<double>(gradient[i]) - last_[i];
      change += d * d;
    }
    upload = change > threshold();
  }
  if (upload) {
    last_.assign(gradient.begin(), gradient.end());
    uploaded_ = true;
    skips_ = 0;
  } else {
    ++skips_;
  }
  return upload;
}

void LagKeyRule::Heard(double norm) {
  norms_.push_back(norm);
  while (static_cast<int>(norms_.size()) > options_.window) norms_.pop_front();
}

double LagKeyRule::threshold() const {
  const double sum = std::accumulate(norms_.begin(), norms_.end(), 0.0);
  return options_.xi / static_cast<double>(options_.window) * sum;
}

void LagKeyRule::VisitState(StateVisitor& v) {
  v.FloatVector("last", last_);
  uint64_t uploaded = uploaded_ ? 1 : 0;
  v.U64("uploaded", uploaded);
  int64_t skips = skips_;
  v.I64("skips", skips);
  uint64_t count = norms_.size();
  v.U64("norms", count);
  if (v.loading() && v.ok() && count > static_cast<uint64_t>(options_.window)) {
    v.Reject(fmt::format("{} norms, the window is {}", count, options_.window));
  }
  if (!v.ok()) return;
  norms_.resize(count);
  for (size_t i = 0; i < norms_.size(); ++i) v.F64(fmt::format("norm/{}", i), norms_[i]);
  if (!v.loading()) return;
  uploaded_ = uploaded != 0;
  skips_ = static_cast<int>(skips);
}

}  // namespace frugal::ps_internal
