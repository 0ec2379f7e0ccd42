// What the engine draws in the timeline (internal): per tensor its queue and negotiate phases,
// per cycle a negotiate span, and per reduction the phases inside it.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "frugal/engine_phases.h"
#include "frugal/reducer.h"
#include "frugal/timeline.h"
#include "frugal/timer.h"

namespace frugal::engine_internal {

// A unit of a reduced bucket: its name in the bucket ("w", "w#1/4") and its tensor's name.
struct DrawnUnit {
  std::string name;
  std::string tensor;
};

// On the row "tensor <name>": "queue" from submission until the tensor was first offered in a
// cycle, "negotiate" from then until it was agreed.
void DrawAgreement(Timeline& timeline, const std::string& tensor, Clock::time_point submitted,
                   Clock::time_point offered, Clock::time_point agreed);

// The reduction of `bucket` in [begin, end): the compress and decompress phases its compressors
// reported (on the "engine" row and on the row of the tensor each belongs to, found by the unit
// name the phase's tensor name starts with), and "communicate" on the engine row and every
// unit's tensor row for the parts of [begin, end) outside them.
void DrawReduction(Timeline& timeline, const BucketInfo& bucket, std::span<const DrawnUnit> units,
                   std::vector<Phase> phases, Clock::time_point begin, Clock::time_point end);

}  // namespace frugal::engine_internal
