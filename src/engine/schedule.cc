// The scheduling policies: the block comment of schedule.h describes each.
#include "engine/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace frugal::engine_internal {

ScheduleOptions ScheduleOptionsOf(const EngineOptions& options) {
  return ScheduleOptions{options.fusion, options.schedule, options.fusion_threshold_bytes,
                         options.partition_bytes};
}

MergePlan::MergePlan(const std::vector<std::vector<uint32_t>>& groups) {
  for (const auto& group : groups) {
    if (group.size() < 2) continue;
    for (uint32_t id : group) group_of_[id] = groups_.size();
    groups_.push_back(group);
  }
}

std::vector<Unit> SplitIntoUnits(const AgreedTensor& tensor, const ScheduleOptions& options,
                                 const MergePlan& plan) {
  size_t parts = 1;
  if (options.schedule == SchedulePolicy::kPriority && options.partition_bytes > 0) {
    const size_t per = std::max<size_t>(1, options.partition_bytes / sizeof(float));
    parts = std::max<size_t>(1, (tensor.count + per - 1) / per);
  }
  const size_t per = parts == 1 ? tensor.count : (tensor.count + parts - 1) / parts;
  std::vector<Unit> units;
  for (size_t p = 0; p < parts; ++p) {
    Unit u;
    u.id = tensor.id;
    u.order = tensor.order;
    u.step = tensor.step;
    u.priority = tensor.priority;
    u.offset = p * per;
    u.count = std::min(per, tensor.count - u.offset);
    u.part = static_cast<int>(p);
    u.parts = static_cast<int>(parts);
    u.held = plan.Contains(tensor.id);
    units.push_back(u);
  }
  return units;
}

void Enqueue(std::vector<Unit>& queue, std::span<const Unit> units,
             const ScheduleOptions& options) {
  queue.insert(queue.end(), units.begin(), units.end());
  if (options.schedule == SchedulePolicy::kPriority) {
    std::stable_sort(queue.begin(), queue.end(), [](const Unit& a, const Unit& b) {
      if (a.priority != b.priority) return a.priority < b.priority;
      if (a.order != b.order) return a.order < b.order;
      return a.part < b.part;
    });
  }
}

bool HasHeld(std::span<const Unit> queue) {
  return std::any_of(queue.begin(), queue.end(), [](const Unit& u) { return u.held; });
}

namespace {

// The first plan group whose members are all queued (held), as an index into plan.groups().
std::optional<size_t> ReadyGroup(std::span<const Unit> queue, const MergePlan& plan) {
  if (plan.empty()) return std::nullopt;
  std::set<uint32_t> queued;
  for (const Unit& u : queue) {
    if (u.held) queued.insert(u.id);
  }
  for (size_t g = 0; g < plan.groups().size(); ++g) {
    const auto& group = plan.groups()[g];
    if (std::all_of(group.begin(), group.end(), [&](uint32_t id) { return queued.count(id); })) {
      return g;
    }
  }
  return std::nullopt;
}

// The members of a ready group, one bucket per step among them (in the order of the first member
// of each step), removed from the queue.
std::vector<std::vector<Unit>> TakeGroup(std::vector<Unit>& queue,
                                         const std::vector<uint32_t>& group) {
  std::vector<Unit> members;
  for (uint32_t id : group) {
    auto it = std::find_if(queue.begin(), queue.end(),
                           [&](const Unit& u) { return u.held && u.id == id; });
    members.push_back(*it);
    queue.erase(it);
  }
  std::vector<std::vector<Unit>> buckets;
  while (!members.empty()) {
    const uint64_t step = members.front().step;
    std::vector<Unit> bucket;
    for (auto it = members.begin(); it != members.end();) {
      if (it->step == step) {
        bucket.push_back(*it);
        it = members.erase(it);
      } else {
        ++it;
      }
    }
    buckets.push_back(std::move(bucket));
  }
  return buckets;
}

// The first unit that is not held, with (under kCycle) the later units of its step that fit
// under the threshold, in queue order; packing stops at the first that does not fit.
std::vector<Unit> TakeFirstUnheld(std::vector<Unit>& queue, const ScheduleOptions& options) {
  auto first = std::find_if(queue.begin(), queue.end(), [](const Unit& u) { return !u.held; });
  std::vector<Unit> bucket{*first};
  queue.erase(first);
  if (options.fusion != FusionPolicy::kCycle) return bucket;
  size_t bytes = bucket[0].bytes();
  for (auto it = queue.begin(); it != queue.end();) {
    if (it->held || it->step != bucket[0].step) {
      ++it;
      continue;
    }
    if (bytes + it->bytes() > options.fusion_threshold_bytes) break;
    bytes += it->bytes();
    bucket.push_back(*it);
    it = queue.erase(it);
  }
  return bucket;
}

}  // namespace

bool HasExecutable(std::span<const Unit> queue, const MergePlan& plan) {
  if (std::any_of(queue.begin(), queue.end(), [](const Unit& u) { return !u.held; })) {
    return true;
  }
  return ReadyGroup(queue, plan).has_value();
}

void ReleaseHeld(std::vector<Unit>& queue) {
  for (Unit& u : queue) u.held = false;
}

std::vector<std::vector<Unit>> TakeBuckets(std::vector<Unit>& queue, const MergePlan& plan,
                                           const ScheduleOptions& options) {
  std::vector<std::vector<Unit>> buckets;
  if (options.schedule == SchedulePolicy::kPriority) {
    if (queue.empty()) return buckets;
    size_t take = 1;
    size_t bytes = queue[0].bytes();
    while (options.partition_bytes > 0 && take < queue.size() &&
           queue[take].step == queue[0].step &&
           bytes + queue[take].bytes() <= options.partition_bytes) {
      bytes += queue[take].bytes();
      ++take;
    }
    buckets.emplace_back(queue.begin(), queue.begin() + static_cast<long>(take));
    queue.erase(queue.begin(), queue.begin() + static_cast<long>(take));
    return buckets;
  }
  while (true) {
    if (std::optional<size_t> group = ReadyGroup(queue, plan)) {
      for (auto& bucket : TakeGroup(queue, plan.groups()[*group])) {
        buckets.push_back(std::move(bucket));
      }
      continue;
    }
    if (std::none_of(queue.begin(), queue.end(), [](const Unit& u) { return !u.held; })) {
      return buckets;
    }
    buckets.push_back(TakeFirstUnheld(queue, options));
  }
}

std::string UnitName(const std::string& tensor, const Unit& unit) {
  return unit.parts == 1 ? tensor : fmt::format("{}#{}/{}", tensor, unit.part, unit.parts);
}

}  // namespace frugal::engine_internal
