// The strategies of the Local SGD family and BSP (see local_sgd.cc).
#pragma once

#include <memory>

#include "frugal/strategy.h"

namespace frugal::strategy_internal {

std::unique_ptr<Strategy> MakeBspStrategy();
// plan.sync.kind == SyncKind::kLocal. `reducer` carries the averages; it must outlive the result.
std::unique_ptr<Strategy> MakeLocalSgdStrategy(const StrategyPlan& plan, GradientReducer& reducer);

}  // namespace frugal::strategy_internal
