// The parameter server's sharding (see sharding.h).
#include "ps/sharding.h"

#include <algorithm>
#include <numeric>

#include "frugal/check.h"
#include "frugal/collectives.h"
#include "frugal/hash.h"

namespace frugal::ps_internal {

ShardPlan PlanShards(std::span<const TensorSpec> tensors, int servers, size_t max_part_bytes) {
  FRUGAL_CHECK(servers >= 1, "a parameter server needs at least one server, not ", servers);
  FRUGAL_CHECK(max_part_bytes >= sizeof(float), "part size ", max_part_bytes, " bytes");
  const size_t max_count = max_part_bytes / sizeof(float);
  ShardPlan plan;
  plan.by_tensor.resize(tensors.size());
  for (size_t t = 0; t < tensors.size(); ++t) {
    const size_t count = tensors[t].count;
    if (count == 0) continue;
    const int pieces = static_cast<int>((count + max_count - 1) / max_count);
    for (int i = 0; i < pieces; ++i) {
      const Block block = BlockPartition(count, pieces, i);
      KeyPart part;
      part.key = static_cast<uint32_t>(plan.parts.size());
      part.tensor = static_cast<uint32_t>(t);
      part.name = pieces == 1 ? tensors[t].name : tensors[t].name + "#" + std::to_string(i);
      part.offset = block.offset;
      part.count = block.count;
      plan.by_tensor[t].push_back(part.key);
      plan.parts.push_back(std::move(part));
    }
  }
  std::vector<uint32_t> order(plan.parts.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return plan.parts[a].count > plan.parts[b].count;
  });
  plan.server_bytes.assign(static_cast<size_t>(servers), 0);
  plan.by_server.resize(static_cast<size_t>(servers));
  for (uint32_t key : order) {
    const auto least = std::min_element(plan.server_bytes.begin(), plan.server_bytes.end());
    const int server = static_cast<int>(least - plan.server_bytes.begin());
    plan.parts[key].server = server;
    *least += plan.parts[key].count * sizeof(float);
    plan.by_server[static_cast<size_t>(server)].push_back(key);
  }
  for (auto& keys : plan.by_server) std::sort(keys.begin(), keys.end());
  return plan;
}

uint64_t ShardPlanFingerprint(const ShardPlan& plan) {
  Fnv1a hash;
  hash.AddU64(plan.parts.size());
  for (const KeyPart& part : plan.parts) {
    hash.AddU64(part.tensor).Add(part.name).AddU64(part.offset).AddU64(part.count);
    hash.AddU64(static_cast<uint64_t>(part.server));
  }
  return hash.value();
}

}  // namespace frugal::ps_internal
