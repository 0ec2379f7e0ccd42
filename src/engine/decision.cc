// The coordinator's decision of a cycle: see decision.h. DecodeDecision bounds every count by the
// bytes left before it allocates or reads; ApplyDecision validates the content against the
// rank's own state before it changes anything.
#include "engine/decision.h"

#include <fmt/format.h>

#include <cstring>
#include <set>

#include "engine/wire.h"

namespace frugal::engine_internal {
namespace {

constexpr std::string_view kDecisionMagic = "FRND";
constexpr uint16_t kDecisionVersion = 1;
constexpr uint16_t kFlagAllWaiting = 1;
constexpr uint16_t kFlagPlan = 2;
constexpr uint32_t kMaxWorldSize = 1u << 20;
constexpr uint32_t kMaxMessageBytes = 1u << 16;

Status Bad(std::string_view what) { return MalformedError(fmt::format("decision: {}", what)); }

// A u32 count of items of at least `min_bytes` each, bounded by the bytes left.
bool GetCount(WireReader& r, size_t min_bytes, uint32_t& count) {
  return r.Get(count) && count <= r.left() / min_bytes;
}

}  // namespace

DecisionMessage MakeDecision(uint64_t cycle, int world_size, const TensorCache& cache,
                             uint32_t cache_size_before, const CycleOutcome& outcome) {
  DecisionMessage d;
  d.cycle = cycle;
  d.world_size = static_cast<uint32_t>(world_size);
  d.cache_size = cache_size_before;
  for (uint32_t id = cache_size_before; id < cache.size(); ++id) d.added.push_back(cache.at(id));
  d.outcome = outcome;
  return d;
}

std::vector<std::byte> EncodeDecision(const DecisionMessage& d) {
  const CycleOutcome& o = d.outcome;
  WireWriter w;
  PutHeader(w, kDecisionMagic, kDecisionVersion);
  w.Put<uint16_t>(
      static_cast<uint16_t>((o.all_waiting ? kFlagAllWaiting : 0) | (o.plan ? kFlagPlan : 0)));
  w.Put<uint64_t>(d.cycle);
  w.Put<uint32_t>(d.world_size);
  w.Put<uint32_t>(d.cache_size);
  w.Put<uint32_t>(static_cast<uint32_t>(d.added.size()));
  for (const TensorDescriptor& t : d.added) PutDescriptor(w, t);
  w.Put<uint32_t>(static_cast<uint32_t>(o.agreed.size()));
  for (uint32_t id : o.agreed) w.Put<uint32_t>(id);
  w.Put<uint32_t>(static_cast<uint32_t>(o.mismatched.size()));
  for (const auto& [id, message] : o.mismatched) {
    const std::string text = message.substr(0, kMaxMessageBytes);
    w.Put<uint32_t>(id);
    w.Put<uint32_t>(static_cast<uint32_t>(text.size()));
    w.Bytes(text.data(), text.size());
  }
  w.Put<uint32_t>(static_cast<uint32_t>(o.partial.size()));
  const size_t mask_bytes = (d.world_size + 7) / 8;
  for (const auto& [id, ranks] : o.partial) {
    w.Put<uint32_t>(id);
    std::vector<uint8_t> mask(mask_bytes, 0);
    for (int r : ranks) mask[static_cast<size_t>(r) / 8] |= static_cast<uint8_t>(1u << (r % 8));
    w.Bytes(mask.data(), mask.size());
  }
  if (o.plan) {
    w.Put<uint32_t>(static_cast<uint32_t>(o.plan->size()));
    for (const auto& group : *o.plan) {
      w.Put<uint32_t>(static_cast<uint32_t>(group.size()));
      for (uint32_t id : group) w.Put<uint32_t>(id);
    }
  }
  return w.Take();
}

StatusOr<DecisionMessage> DecodeDecision(std::span<const std::byte> bytes) {
  WireReader r(bytes);
  if (std::optional<std::string> error = GetHeader(r, kDecisionMagic, kDecisionVersion))
    return Bad(*error);
  uint16_t flags = 0;
  DecisionMessage d;
  CycleOutcome& o = d.outcome;
  if (!r.Get(flags) || (flags & ~(kFlagAllWaiting | kFlagPlan)) != 0) return Bad("unknown flags");
  o.all_waiting = (flags & kFlagAllWaiting) != 0;
  if (!r.Get(d.cycle) || !r.Get(d.world_size) || !r.Get(d.cache_size)) {
    return Bad("truncated header");
  }
  if (d.world_size == 0 || d.world_size > kMaxWorldSize) return Bad("world size out of range");
  uint32_t count = 0;
  if (!GetCount(r, 9, count)) return Bad("bad count of new tensors");
  for (uint32_t i = 0; i < count; ++i) {
    TensorDescriptor t;
    if (std::optional<std::string> error = GetDescriptor(r, t)) return Bad(*error);
    d.added.push_back(std::move(t));
  }
  if (!GetCount(r, 4, count)) return Bad("bad count of agreed tensors");
  o.agreed.resize(count);
  for (uint32_t& id : o.agreed) r.Get(id);
  if (!GetCount(r, 8, count)) return Bad("bad count of mismatched tensors");
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t id = 0;
    uint32_t size = 0;
    std::string text;
    if (!r.Get(id) || !r.Get(size) || size > kMaxMessageBytes || !r.String(size, text)) {
      return Bad("bad mismatch");
    }
    o.mismatched.emplace_back(id, std::move(text));
  }
  const size_t mask_bytes = (d.world_size + 7) / 8;
  if (!GetCount(r, 4 + mask_bytes, count)) return Bad("bad count of partial tensors");
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t id = 0;
    std::vector<uint8_t> mask;
    if (!r.Get(id) || !r.Raw(mask_bytes, mask)) return Bad("truncated partial tensor");
    std::vector<int> ranks;
    for (uint32_t rank = 0; rank < mask_bytes * 8; ++rank) {
      if (((mask[rank / 8] >> (rank % 8)) & 1) == 0) continue;
      if (rank >= d.world_size) return Bad("a rank beyond the world size");
      ranks.push_back(static_cast<int>(rank));
    }
    o.partial.emplace_back(id, std::move(ranks));
  }
  if ((flags & kFlagPlan) != 0) {
    if (!GetCount(r, 4, count)) return Bad("bad plan size");
    std::vector<std::vector<uint32_t>> plan;
    for (uint32_t g = 0; g < count; ++g) {
      uint32_t size = 0;
      if (!GetCount(r, 4, size) || size == 0) return Bad("bad plan group");
      std::vector<uint32_t> group(size);
      for (uint32_t& id : group) r.Get(id);
      plan.push_back(std::move(group));
    }
    o.plan = std::move(plan);
  }
  if (r.left() != 0) return Bad("trailing bytes");
  return d;
}

StatusOr<CycleOutcome> ApplyDecision(TensorCache& cache, const DecisionMessage& d, uint64_t cycle,
                                     int world_size) {
  if (d.cycle != cycle) {
    return MalformedError(fmt::format(
        "negotiation: the coordinator sent the decision of cycle {}, this rank is in cycle {}",
        d.cycle, cycle));
  }
  if (d.world_size != static_cast<uint32_t>(world_size) || d.cache_size != cache.size()) {
    return MalformedError(fmt::format(
        "negotiation: the coordinator's decision is for {} ranks and {} cached tensors, this rank "
        "has {} and {}",
        d.world_size, d.cache_size, world_size, cache.size()));
  }
  std::set<std::string> names;
  for (const TensorDescriptor& t : d.added) {
    if (cache.Find(t.name) || !names.insert(t.name).second) {
      return MalformedError(
          fmt::format("negotiation: the decision adds tensor '{}' again", t.name));
    }
  }
  const uint64_t size = uint64_t{cache.size()} + d.added.size();
  const CycleOutcome& o = d.outcome;
  auto bad_id = [&](uint32_t id) { return id >= size; };
  bool bad = false;
  for (uint32_t id : o.agreed) bad = bad || bad_id(id);
  for (const auto& [id, message] : o.mismatched) bad = bad || bad_id(id);
  for (const auto& [id, ranks] : o.partial) bad = bad || bad_id(id);
  if (o.plan) {
    for (const auto& group : *o.plan) {
      for (uint32_t id : group) bad = bad || bad_id(id);
    }
  }
  if (bad) {
    return MalformedError(
        fmt::format("negotiation: the decision names a tensor id beyond the {} known", size));
  }
  for (const TensorDescriptor& t : d.added) cache.Add(t);
  return o;
}

}  // namespace frugal::engine_internal
