// The coordinator's decision of a negotiation cycle (internal): what every rank learns from the
// coordinator after it has evaluated every rank's report, so that every rank applies the same
// outcome to the same cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/negotiation.h"
#include "frugal/status.h"

namespace frugal::engine_internal {

struct DecisionMessage {
  uint64_t cycle = 0;
  uint32_t world_size = 0;
  uint32_t cache_size = 0;              // the coordinator's cache before the cycle
  std::vector<TensorDescriptor> added;  // entered the cache in the cycle: ids cache_size, ...
  CycleOutcome outcome;
};

// The decision of `outcome` in `cycle`, the coordinator's cache having grown from
// `cache_size_before` entries to `cache`.
DecisionMessage MakeDecision(uint64_t cycle, int world_size, const TensorCache& cache,
                             uint32_t cache_size_before, const CycleOutcome& outcome);

// Wire format, little-endian: magic "FRND", version u16, flags u16 (1 all waiting, 2 plan),
// cycle u64, world_size u32, cache_size u32, added (u32 count + descriptors), agreed (u32 count +
// u32 ids), mismatched (u32 count + (u32 id, u32 length + message)), partial (u32 count + (u32 id,
// a bit per rank, LSB first, (world_size + 7) / 8 bytes)), plan if flagged (u32 groups, each u32
// count + u32 ids).
std::vector<std::byte> EncodeDecision(const DecisionMessage& decision);
// Checks every count and length against the bytes left; kMalformed otherwise.
StatusOr<DecisionMessage> DecodeDecision(std::span<const std::byte> bytes);

// A rank in `cycle` of a world of `world_size`: adds the decision's new tensors to `cache` and
// returns its outcome, after checking that the decision is of this cycle and world, that the
// cache had the coordinator's size, and that every id and rank it names exists (kMalformed
// otherwise, `cache` unchanged).
StatusOr<CycleOutcome> ApplyDecision(TensorCache& cache, const DecisionMessage& decision,
                                     uint64_t cycle, int world_size);

}  // namespace frugal::engine_internal
