// LAG's worker-side rule for one key (internal; LagOptions in parameter_server.h, Chen et al.
// 2018, LAG-WK): the worker uploads its gradient only when it changed enough since its last upload
// against the recent updates of the key, and is forced to after max_skip skips in a row.
#pragma once

#include <deque>
#include <span>
#include <vector>

#include "frugal/parameter_server.h"
#include "frugal/state_visitor.h"

namespace frugal::ps_internal {

class LagKeyRule {
 public:
  explicit LagKeyRule(const LagOptions& options) : options_(options) {}

  // Whether `gradient` is uploaded: at the first push, after max_skip skips in a row, or when
  // ||gradient - last upload||^2 > (xi / window) * (the sum of the last `window` norms heard). An
  // uploaded gradient becomes the last upload.
  bool Decide(std::span<const float> gradient);
  // ||gbar||^2 of the update that made the version the worker just pulled.
  void Heard(double norm);
  double threshold() const;

  // The rule's state from one step to the next (a checkpoint): the last upload, whether there was
  // one, the skips in a row and the norms heard.
  void VisitState(StateVisitor& v);

 private:
  LagOptions options_;
  std::vector<float> last_;
  bool uploaded_ = false;
  int skips_ = 0;
  std::deque<double> norms_;
};

}  // namespace frugal::ps_internal
