// How a parameter server cuts the model into keys and places them on the servers: a pure
// function of the tensors, the number of servers and the largest part, so that every rank
// (workers from their model, servers from the workers' hello) computes the same plan without
// talking about it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "frugal/reducer.h"

namespace frugal::ps_internal {

// One key: a contiguous part of one tensor, held by one server.
struct KeyPart {
  uint32_t key = 0;     // index into ShardPlan::parts
  uint32_t tensor = 0;  // index into the tensors the plan was made from
  std::string name;     // the tensor's name, with "#i" for part i of a tensor cut in several
  size_t offset = 0;    // elements into the tensor
  size_t count = 0;     // elements, > 0
  int server = 0;       // 0 .. servers - 1
};

struct ShardPlan {
  std::vector<KeyPart> parts;                    // tensor by tensor, each by offset
  std::vector<std::vector<uint32_t>> by_tensor;  // keys of each tensor, by offset
  std::vector<std::vector<uint32_t>> by_server;  // keys of each server, ascending
  std::vector<uint64_t> server_bytes;            // float bytes each server holds
};

// Cuts every tensor into ceil(bytes / max_part_bytes) parts whose sizes differ by at most one
// element (BlockPartition), then places the parts largest first (ties: lower key first), each on
// the server that holds the fewest bytes so far (ties: the lower server): the greedy
// longest-processing-time rule, within 4/3 of the best balance. Tensors with no elements get no
// key. servers >= 1 and max_part_bytes >= sizeof(float), else CheckError.
ShardPlan PlanShards(std::span<const TensorSpec> tensors, int servers, size_t max_part_bytes);

// 64-bit fingerprint of the plan (every part's tensor, name, offset, count and server).
uint64_t ShardPlanFingerprint(const ShardPlan& plan);

}  // namespace frugal::ps_internal
