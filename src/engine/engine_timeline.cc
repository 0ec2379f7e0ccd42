// What the engine draws in the timeline: see engine_timeline.h.
#include "engine/engine_timeline.h"

#include <fmt/format.h>

#include <algorithm>

namespace frugal::engine_internal {

void DrawAgreement(Timeline& timeline, const std::string& tensor, Clock::time_point submitted,
                   Clock::time_point offered, Clock::time_point agreed) {
  const std::string row = "tensor " + tensor;
  timeline.Span(row, "queue", submitted, offered);
  timeline.Span(row, "negotiate", offered, agreed);
}

void DrawReduction(Timeline& timeline, const BucketInfo& bucket, std::span<const DrawnUnit> units,
                   std::vector<Phase> phases, Clock::time_point begin, Clock::time_point end) {
  const std::string args =
      fmt::format(R"({{"bucket":{},"bytes":{},"tensors":{}}})", JsonQuote(bucket.name),
                  bucket.count * sizeof(float), units.size());
  std::sort(phases.begin(), phases.end(),
            [](const Phase& a, const Phase& b) { return a.begin < b.begin; });
  auto row_of = [&](const std::string& tensor) -> std::string {
    for (const DrawnUnit& u : units) {
      if (tensor.compare(0, u.name.size(), u.name) == 0) return "tensor " + u.tensor;
    }
    return {};
  };
  auto communicate = [&](Clock::time_point from, Clock::time_point to) {
    if (to <= from) return;
    timeline.Span("engine", "communicate", from, to, args);
    for (const DrawnUnit& u : units) {
      timeline.Span("tensor " + u.tensor, "communicate", from, to, args);
    }
  };
  Clock::time_point cursor = begin;
  for (const Phase& phase : phases) {
    communicate(cursor, phase.begin);
    timeline.Span("engine", phase.name, phase.begin, phase.end, args);
    const std::string row = row_of(phase.tensor);
    if (!row.empty()) timeline.Span(row, phase.name, phase.begin, phase.end, args);
    cursor = std::max(cursor, phase.end);
  }
  communicate(cursor, end);
}

}  // namespace frugal::engine_internal
