// Validation of EngineOptions and what ranks must agree on (internal).
#pragma once

#include "frugal/engine.h"
#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal::engine_internal {

// Fills the defaults that depend on other options (the stall warning: half the timeout), throws
// CheckError for values no caller may pass (a zero timeout, a negative cycle time) and returns
// kInvalidArgument for a configuration that cannot work (a stall warning or shutdown not shorter
// than the timeout).
Status ResolveOptions(EngineOptions& options);

// Collective over `t`: kInvalidArgument on every rank, naming the ranks that differ from rank
// 0, unless every rank passes the same options where they decide the buckets (fusion,
// thresholds, schedule, partition, cycle time, MG-WFBP settings, unmatched-name detection).
// Bounded by options.timeout.
Status CheckSameSchedulingOptions(Transport& t, const EngineOptions& options);

}  // namespace frugal::engine_internal
